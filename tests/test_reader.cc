// Damaged, foreign, truncated and newer files: one clear error or warning
// each, never a crash, and what is readable is still read.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "merger/frames.h"
#include "merger/rank_set.h"
#include "merger/simulate.h"
#include "merger/symbolize.h"
#include "merger/trace_reader.h"
#include "tests/test_util.h"

namespace hangtrace {
namespace {

using testing::RunProgram;
using testing::TempDir;

std::vector<uint8_t> BytesOf(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// A real file from a real run, as bytes.
std::vector<uint8_t> GoodFile(const TempDir& dir) {
  auto r = RunProgram({HT_PROG, "events", "20"},
                      {{"LD_PRELOAD", HT_PRELOAD}, {"HANGTRACE_DIR", dir.path()}, {"HANGTRACE_RING", "1024"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto files = testing::ListTraceFiles(dir.path());
  EXPECT_EQ(files.size(), 1u);
  return BytesOf(files.at(0));
}

// The path of one file of a small simulated job (`hangtrace simulate`'s
// defaults) written into `dir`: small, and every byte allocated.
std::string SimulatedFile(const TempDir& dir) {
  SimConfig cfg;
  cfg.out = dir.path();
  SimResult result;
  std::string err;
  EXPECT_TRUE(Simulate(cfg, &result, &err)) << err;
  return testing::ListTraceFiles(dir.path()).at(0);
}

std::string ErrorOf(const std::vector<uint8_t>& bytes) {
  std::string err;
  auto s = ReadTraceBytes(bytes.data(), bytes.size(), "f.htrace", &err);
  EXPECT_FALSE(s);
  return err;
}

TEST(Reader, GoodFileReads) {
  TempDir dir;
  auto bytes = GoodFile(dir);
  std::string err;
  auto s = ReadTraceBytes(bytes.data(), bytes.size(), "f", &err);
  ASSERT_TRUE(s) << err;
  EXPECT_TRUE(s->warnings.empty());
  EXPECT_EQ(s->events.size(), 40u);
}

// The loader's read (ReadOptions::events_in_place): a small file whose
// bytes are all allocated (as dumps and `simulate` write) is read with one
// pread, its records left in the buffer; a live runtime's (MiBs of lanes)
// is mapped and its records copied; a copy that shows a record being
// written is read again through a mapping. Every way visits the same records.
TEST(Reader, ASmallDenseFileIsReadInPlaceARuntimesOrATornOneThroughAMapping) {
  auto records = [](const TraceSnapshot& s) {
    std::vector<std::string> out;
    s.ForEachRecord([&](const fmt::Record& r, uint32_t lane, uint64_t index) {
      out.push_back(std::string(reinterpret_cast<const char*>(&r), sizeof(r)) + std::to_string(lane) + "." +
                    std::to_string(index));
    });
    return out;
  };
  ReadOptions in_place;
  in_place.sort_events = false;
  in_place.events_in_place = true;
  std::string err;

  TempDir sim;
  const std::string dense = SimulatedFile(sim);
  const std::vector<uint8_t> bytes = BytesOf(dense);
  auto want = ReadTraceBytes(bytes.data(), bytes.size(), "f", &err, {.sort_events = false});
  ASSERT_TRUE(want) << err;
  ASSERT_GT(want->events.size(), 10u);
  auto s = ReadTraceFile(dense, &err, in_place);
  ASSERT_TRUE(s) << err;
  EXPECT_FALSE(s->lanes_in_place.empty());
  EXPECT_TRUE(s->events.empty());
  EXPECT_EQ(s->EventCount(), want->events.size());
  EXPECT_EQ(records(*s), records(*want));

  // One record's ticket off (torn, or being written): read through a mapping.
  const fmt::FileHeader* h = reinterpret_cast<const fmt::FileHeader*>(bytes.data());
  std::vector<uint8_t> torn = bytes;
  reinterpret_cast<fmt::Record*>(torn.data() + h->sections[fmt::kSecRing].offset)[3].commit ^= 0x40;
  std::ofstream(dense, std::ios::binary).write(reinterpret_cast<const char*>(torn.data()), std::streamsize(torn.size()));
  s = ReadTraceFile(dense, &err, in_place);
  ASSERT_TRUE(s) << err;
  EXPECT_TRUE(s->lanes_in_place.empty());
  EXPECT_EQ(s->events.size(), want->events.size() - 1);
  EXPECT_EQ(s->events_rejected, 1u);

  TempDir dir;
  const std::vector<uint8_t> runtime_bytes = GoodFile(dir);
  const std::string runtime = testing::ListTraceFiles(dir.path()).at(0);  // the runtime's own
  struct stat st;
  ASSERT_EQ(stat(runtime.c_str(), &st), 0);
  ASSERT_GT(st.st_size, 1 << 20) << "a runtime's file is expected larger than what is read whole";
  want = ReadTraceBytes(runtime_bytes.data(), runtime_bytes.size(), "f", &err, {.sort_events = false});
  ASSERT_TRUE(want) << err;
  s = ReadTraceFile(runtime, &err, in_place);
  ASSERT_TRUE(s) << err;
  EXPECT_TRUE(s->lanes_in_place.empty());
  EXPECT_EQ(s->events.size(), 40u);
  EXPECT_EQ(records(*s), records(*want));
}

// A call table entry with no name is damaged (the runtime names every
// call): its records are calls of no kind, never a collective to compare
// (a fuzzed file once gave "MISMATCH: rank 3 calls  as collective #1").
TEST(Reader, ACallWithNoNameIsACallOfNoKind) {
  TempDir sim;
  std::vector<uint8_t> bytes = BytesOf(SimulatedFile(sim));
  std::string err;
  const fmt::FileHeader* h = reinterpret_cast<const fmt::FileHeader*>(bytes.data());
  auto* calls = reinterpret_cast<fmt::CallInfo*>(bytes.data() + h->sections[fmt::kSecCalls].offset);
  ASSERT_GT(h->sections[fmt::kSecCalls].count, 1u);
  ASSERT_NE(calls[1].flags, 0);
  memset(calls[1].name, 0, sizeof(calls[1].name));
  auto s = ReadTraceBytes(bytes.data(), bytes.size(), "f", &err);
  ASSERT_TRUE(s) << err;
  EXPECT_EQ(s->calls[1].flags, 0);
  EXPECT_EQ(s->calls[1].op, fmt::Op::kNone);
  EXPECT_EQ(s->calls[1].name, "(a call the file does not name)");
  ASSERT_FALSE(s->warnings.empty());
  EXPECT_NE(s->warnings[0].find("have no name (damaged)"), std::string::npos) << s->warnings[0];
}

// Text a damaged or planted file holds is printed as '?' where it has a
// control byte or bytes that are not UTF-8 (an escape sequence would reach
// the terminal of whoever reads the report); UTF-8 stays whole. A module's
// path, which is opened, stays as written.
TEST(Reader, TextFromAFileIsPrintable) {
  EXPECT_EQ(BoundedString("trai\x01n\x1b[2J", 16), "trai?n?[2J");
  EXPECT_EQ(BoundedString("run \xe1", 16), "run ?");
  EXPECT_EQ(BoundedString("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5", 32), "\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5");
  EXPECT_EQ(BoundedString("\xc0\xaf\xed\x7f\xff", 16), "?????");  // no lead, a lone continuation, one cut short
  EXPECT_EQ(BoundedString("abc\x7f", 3), "abc");  // bounded first
  EXPECT_EQ(BoundedBytes("/lib/\x01.so", 16), "/lib/\x01.so");

  TempDir sim;
  std::vector<uint8_t> bytes = BytesOf(SimulatedFile(sim));
  const fmt::FileHeader* h = reinterpret_cast<const fmt::FileHeader*>(bytes.data());
  auto* calls = reinterpret_cast<fmt::CallInfo*>(bytes.data() + h->sections[fmt::kSecCalls].offset);
  snprintf(calls[1].name, sizeof(calls[1].name), "%s", "MPI_\x1b[31mBcast");
  auto* p = reinterpret_cast<fmt::ProcessInfo*>(bytes.data() + h->sections[fmt::kSecProcess].offset);
  snprintf(p->host, sizeof(p->host), "%s", "node\x07\xff");
  std::string err;
  auto s = ReadTraceBytes(bytes.data(), bytes.size(), "f", &err);
  ASSERT_TRUE(s) << err;
  EXPECT_EQ(s->calls[1].name, "MPI_?[31mBcast");
  EXPECT_STREQ(s->process.host, "node??");
}

TEST(Reader, ForeignFile) {
  std::vector<uint8_t> bytes(8192, 'x');
  EXPECT_NE(ErrorOf(bytes).find("not a hangtrace trace file"), std::string::npos);
}

TEST(Reader, EmptyAndShortFiles) {
  TempDir dir;
  auto bytes = GoodFile(dir);
  bytes.resize(100);
  EXPECT_NE(ErrorOf(bytes).find("truncated: 100 bytes"), std::string::npos);
  std::string path = dir.path() + "/empty.htrace";
  std::ofstream(path).close();
  std::string err;
  EXPECT_FALSE(ReadTraceFile(path, &err));
  EXPECT_NE(err.find("empty file"), std::string::npos) << err;
}

TEST(Reader, NewerFormatIsRefusedWithVersions) {
  TempDir dir;
  auto bytes = GoodFile(dir);
  auto* h = reinterpret_cast<fmt::FileHeader*>(bytes.data());
  h->version = 9;
  h->oldest_readable = 7;
  std::string err = ErrorOf(bytes);
  EXPECT_NE(err.find("newer hangtrace (format version 9, readable from version 7)"), std::string::npos) << err;
}

TEST(Reader, NewerButCompatibleFormatIsRead) {
  TempDir dir;
  auto bytes = GoodFile(dir);
  reinterpret_cast<fmt::FileHeader*>(bytes.data())->version = 2;  // oldest_readable stays 1
  std::string err;
  EXPECT_TRUE(ReadTraceBytes(bytes.data(), bytes.size(), "f", &err)) << err;
}

TEST(Reader, FileThatNeverFinishedItsLayout) {
  TempDir dir;
  auto bytes = GoodFile(dir);
  reinterpret_cast<fmt::FileHeader*>(bytes.data())->ready = 0;
  EXPECT_NE(ErrorOf(bytes).find("incomplete"), std::string::npos);
}

TEST(Reader, TruncatedFileKeepsWhatIsThere) {
  TempDir dir;
  auto bytes = GoodFile(dir);
  const auto* h = reinterpret_cast<const fmt::FileHeader*>(bytes.data());
  bytes.resize(h->sections[fmt::kSecRing].offset + 100);  // tables whole, ring cut
  std::string err;
  auto s = ReadTraceBytes(bytes.data(), bytes.size(), "f", &err);
  ASSERT_TRUE(s) << err;
  ASSERT_GE(s->warnings.size(), 2u);
  EXPECT_NE(s->warnings[0].find("truncated"), std::string::npos);
  EXPECT_NE(s->warnings[1].find("event ring cut short: 0 whole lane(s)"), std::string::npos) << s->warnings[1];
  EXPECT_EQ(fmt::ProcState(s->process.state), fmt::ProcState::kExited);
  EXPECT_FALSE(s->calls.empty());
  EXPECT_TRUE(s->events.empty());
}

TEST(Reader, CorruptCountsAndOffsetsAreBounded) {
  TempDir dir;
  auto bytes = GoodFile(dir);
  auto* h = reinterpret_cast<fmt::FileHeader*>(bytes.data());
  h->counters.call_count = 0xffffffff;
  h->counters.comm_count = 0xffffffff;
  h->counters.stack_count = 0xffffffff;
  h->counters.thread_count = 0xffffffff;
  h->sections[fmt::kSecStacks].offset = ~0ull - 10;
  h->lane_slots = 3;  // not a power of two
  std::string err;
  auto s = ReadTraceBytes(bytes.data(), bytes.size(), "f", &err);
  ASSERT_TRUE(s) << err;
  EXPECT_TRUE(s->events.empty());
  bool stack_warned = false, lane_warned = false;
  for (const std::string& w : s->warnings) {
    stack_warned |= w.find("stack table skipped") != std::string::npos;
    lane_warned |= w.find("lane layout") != std::string::npos;
  }
  EXPECT_TRUE(stack_warned);
  EXPECT_TRUE(lane_warned);
}

// How many pages of [off, off + len) of the file are in the page cache.
size_t CachedPages(const std::string& path, uint64_t off, uint64_t len) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const long page = sysconf(_SC_PAGESIZE);
  void* map = mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, off_t(off));
  close(fd);
  if (map == MAP_FAILED) return SIZE_MAX;
  std::vector<unsigned char> in((len + page - 1) / page);
  size_t cached = 0;
  if (mincore(map, len, in.data()) == 0) {
    for (unsigned char c : in) cached += c & 1;
  } else {
    cached = SIZE_MAX;
  }
  munmap(map, len);
  return cached;
}

// A crafted header over a sparse file: lanes of 2^22 records (256 MiB each,
// 64 GiB of ring) where a few pages were written. The reader must touch what
// the file holds, not what the header claims: before, one thread's lane
// alone put 256 MiB in the page cache (36 s and 22 GB of page cache with more
// threads; a SIGBUS on a full tmpfs).
TEST(Reader, AnInflatedHeaderOverASparseFileTouchesOnlyItsData) {
  TempDir dir;
  auto bytes = GoodFile(dir);
  auto* h = reinterpret_cast<fmt::FileHeader*>(bytes.data());
  const uint64_t slots = uint64_t(1) << 22;
  fmt::Section& ring = h->sections[fmt::kSecRing];
  const fmt::Section& threads = h->sections[fmt::kSecThreads];
  h->lane_slots = uint32_t(slots);
  ring.count = slots * threads.count;
  h->file_size = ring.offset + ring.count * sizeof(fmt::Record);
  auto* slot0 = reinterpret_cast<fmt::ThreadSlot*>(bytes.data() + threads.offset);
  ASSERT_NE(slot0->tid, 0u);
  slot0->head = slots + 5;  // a lane claimed full and wrapped
  bytes.resize(ring.offset);  // the tables only: the ring is a hole
  const std::string path = dir.path() + "/sparse.htrace";
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  ASSERT_EQ(truncate(path.c_str(), off_t(h->file_size)), 0);
  std::string err;
  auto s = ReadTraceFile(path, &err);
  ASSERT_TRUE(s) << err;
  EXPECT_LT(CachedPages(path, ring.offset, slots * sizeof(fmt::Record)), 16u)
      << "the reader brought the holes of the first lane into the page cache";
  EXPECT_TRUE(s->events.empty());
  EXPECT_EQ(s->events_lost, 5u);
  EXPECT_EQ(s->events_rejected, slots) << "every record in the hole is one the lane should have had";
  EXPECT_FALSE(s->threads.empty());
}

// A module path in a trace file is anyone's choice: a FIFO, a device or a
// folder must neither block the symbolizer nor be read.
TEST(Reader, ModulePathsAreOpenedOnlyWhenRegularFiles) {
  TempDir dir;
  const std::string fifo = dir.path() + "/module.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  alarm(20);  // a blocked open fails the test instead of hanging it
  Symbolizer symbols;
  for (const std::string& path : {fifo, std::string("/dev/zero"), std::string("/dev/tty"), dir.path()}) {
    Frame f;
    f.module = path;
    f.offset = 0x1000;
    symbols.Resolve(&f);
    EXPECT_EQ(f.func, "") << path;
  }
  alarm(0);
}

// A thread that blocks the capture signal has a slot but no time: the
// capture is timed by the threads that answered (inspect printed "captured
// at -5030.610 s" when the blocked one came first).
TEST(Reader, ACaptureIsTimedByTheThreadsThatAnswered) {
  TraceSnapshot s;
  StackInfo blocked, answered, pending;
  blocked.status = fmt::StackStatus::kBlocked;
  answered.status = fmt::StackStatus::kDone;
  answered.ticks = 5000;
  pending.status = fmt::StackStatus::kPending;
  pending.ticks = 9000;  // asked, never finished: its time is not the capture's
  s.stacks = {blocked, pending, answered};
  EXPECT_EQ(s.CaptureTicks(), 5000u);
  s.stacks = {blocked};
  EXPECT_EQ(s.CaptureTicks(), 0u);
}

TEST(RankSet, PrintsAndParsesRanges) {
  RankSet s;
  for (int r : {0, 1, 2, 3, 4, 6, 7, 100, 64, 65}) s.Add(r);
  EXPECT_EQ(s.ToString(), "0-4,6-7,64-65,100");
  EXPECT_EQ(s.Count(), 10u);
  RankSet p;
  ASSERT_TRUE(RankSet::Parse("0-4,6-7,64-65,100", &p));
  EXPECT_EQ(p.ToString(), s.ToString());
  EXPECT_FALSE(RankSet::Parse("3-1", &p));
  EXPECT_FALSE(RankSet::Parse("a", &p));
  EXPECT_EQ(RankSet().ToString(), "");
}

TEST(Frames, LongCppSignaturesAreShortenedForPeopleOnly) {
  const std::string args(120, 'x');
  // GROMACS's do_force: 600 characters of parameters, then the location.
  EXPECT_EQ(Shortened("do_force(_IO_FILE*, t_commrec const*, " + args + ") (sim_util.cpp:1200)"),
            "do_force(...) (sim_util.cpp:1200)");
  EXPECT_EQ(Shortened("ns::Cls<std::pair<int, int> >::run(std::function<void (int)>, " + args + ") const"),
            "ns::Cls<std::pair<int, int> >::run(...)");
  // Short names, Python frames and frames without a parameter list stay.
  EXPECT_EQ(Shortened("trainer::(anonymous namespace)::Trainer::Step(int)"),
            "trainer::(anonymous namespace)::Trainer::Step(int)");
  EXPECT_EQ(Shortened("train_step (pretrain.py:212)"), "train_step (pretrain.py:212)");
  const std::string no_params = "f" + args + " (x.cc:1)";
  EXPECT_EQ(Shortened(no_params), no_params);
  const std::string unbalanced = "g" + args + ")";
  EXPECT_EQ(Shortened(unbalanced), unbalanced);
}

TEST(Frames, TheUsersCodeIsToldFromLibrariesAndFromHangtracesOwn) {
  auto py = [](const std::string& file) {
    Frame f;
    f.lang = Frame::Lang::kPython, f.func = "f", f.file = file, f.line = 3;
    return f;
  };
  auto native = [](const std::string& module, const std::string& func = "f") {
    Frame f;
    f.func = func, f.module = module, f.offset = 0x40;
    return f;
  };
  const FrameOwners guess;
  struct Case {
    Frame frame;
    FrameOwner owner;
  };
  const Case cases[] = {
      {py("/home/u/run/train.py"), FrameOwner::kUser},
      {py("<string>"), FrameOwner::kUser},  // python -c
      {py("/usr/lib/python3/dist-packages/h5py/_hl/files.py"), FrameOwner::kLibrary},
      {py("/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py"), FrameOwner::kLibrary},
      {py("/home/u/venv/lib/python3.11/site-packages/mylib/io.py"), FrameOwner::kLibrary},
      {py("/usr/lib/python3.11/threading.py"), FrameOwner::kLibrary},
      {py("/root/.pyenv/versions/3.11.9/lib/python3.11/queue.py"), FrameOwner::kLibrary},
      {py("<frozen importlib._bootstrap>"), FrameOwner::kLibrary},
      {py("/opt/ht/lib/hangtrace/python/hangtrace_torch.py"), FrameOwner::kHangtrace},
      {py("/src/hangtrace/python/sitecustomize.py"), FrameOwner::kHangtrace},
      {native("/home/u/app/lmp_mpi", "main"), FrameOwner::kUser},
      {native("/home/u/app/libmine.so"), FrameOwner::kUser},
      {native("/home/u/app/lmp_mpi", "_start"), FrameOwner::kLibrary},  // crt's, linked into the program
      {native("/usr/lib/x86_64-linux-gnu/libmpi.so.40"), FrameOwner::kLibrary},
      {native("/opt/openmpi-5/lib/libmpi.so.40"), FrameOwner::kLibrary},
      {native("/usr/bin/python3.11", "_PyEval_EvalFrameDefault"), FrameOwner::kLibrary},
      {native("/root/.pyenv/versions/3.11.9/lib/libpython3.11.so.1.0"), FrameOwner::kLibrary},
      {native("/usr/lib/x86_64-linux-gnu/libc.so.6", "__poll"), FrameOwner::kLibrary},
      {native("/usr/local/cuda/lib64/libcudart.so.13"), FrameOwner::kLibrary},
      {native("/home/u/venv/lib/python3.11/site-packages/numpy/core/_multiarray.so"), FrameOwner::kLibrary},
      {native("/opt/ht/lib/libhangtrace.so", "MPI_Barrier"), FrameOwner::kHangtrace},
      // The torch hook's record path (found by a tester: a hang's verdict
      // named "CallVectorcall (_hangtrace_torch.cc:379)" as the program's place).
      {native("/opt/ht/lib/hangtrace/python/_hangtrace_torch.cpython-311-x86_64-linux-gnu.so", "CallVectorcall"),
       FrameOwner::kHangtrace},
      {native("[vdso]"), FrameOwner::kLibrary},
      {native("", Frame::kNativeNotRead), FrameOwner::kLibrary},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FrameOwnerName(guess.Of(c.frame)), std::string(FrameOwnerName(c.owner))) << c.frame.Text();
  }
  Frame kernel;
  kernel.lang = Frame::Lang::kKernel, kernel.func = "futex_wait";
  EXPECT_EQ(guess.Of(kernel), FrameOwner::kLibrary);
  // A folder named by the user wins over the guess, with or without its
  // trailing slash, and only for that folder (not a sibling sharing its prefix).
  const FrameOwners named(SplitUserPaths("/home/u/venv/lib/python3.11/site-packages/mylib::/opt/openmpi-5/lib/"));
  EXPECT_EQ(named.user_paths().size(), 2u);
  EXPECT_EQ(named.Of(py("/home/u/venv/lib/python3.11/site-packages/mylib/io.py")), FrameOwner::kUser);
  EXPECT_EQ(named.Of(py("/home/u/venv/lib/python3.11/site-packages/mylib2/io.py")), FrameOwner::kLibrary);
  EXPECT_EQ(named.Of(native("/opt/openmpi-5/lib/libmpi.so.40")), FrameOwner::kUser);
  // hangtrace's own stays hangtrace's wherever it lies.
  const FrameOwners everything(SplitUserPaths("/"));
  EXPECT_EQ(everything.Of(py("/opt/ht/lib/hangtrace/python/hangtrace_torch.py")), FrameOwner::kHangtrace);
  EXPECT_EQ(everything.Of(native("/opt/ht/lib/libhangtrace.so")), FrameOwner::kHangtrace);
  EXPECT_EQ(everything.Of(native("/opt/ht/lib/hangtrace/python/_hangtrace_torch.cpython-311-x86_64-linux-gnu.so")),
            FrameOwner::kHangtrace);
}

TEST(RankSet, IntersectsOnlyWhenARankIsShared) {
  RankSet a, b, far;
  a.Add(3), a.Add(130);
  b.Add(4), b.Add(131);
  far.Add(130);
  EXPECT_FALSE(a.Intersects(b));
  EXPECT_TRUE(a.Intersects(far));
  EXPECT_TRUE(far.Intersects(a));  // sets of different lengths, either way
  EXPECT_FALSE(RankSet().Intersects(a));
}

}  // namespace
}  // namespace hangtrace
