// Python jobs, traced unmodified: mpi4py's libmpi arrives by dlopen and is
// traced; the seed's hang written in mpi4py is diagnosed with each stuck
// rank's Python function and line; a healthy mpi4py job using every
// communicator call runs as it does untraced; and the Python frames of every
// CPython on this machine are read in the process (the watchdog's capture,
// by CPython's own dumper) and from outside (hangtrace dump), on a running,
// a stopped and a dead process.
//
// Debian's python3 with python3-mpi4py runs the MPI tests (scripts/setup.sh
// installs them); the per-version tests use pyenv's CPythons and skip, saying
// so, the versions that are not installed.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "merger/diagnose.h"
#include "merger/report.h"
#include "tests/test_util.h"

namespace hangtrace {
namespace {

using testing::ProgramResult;
using testing::RunProgram;
using testing::Started;
using testing::TempDir;

const std::string kDebianPython = "/usr/bin/python3";
const std::string kScripts = HT_SOURCE_DIR "/tests/python";

// The lines of a script marked "# at: NAME".
std::map<std::string, int> Markers(const std::string& script) {
  std::map<std::string, int> out;
  std::ifstream in(script);
  std::regex marker("#\\s*at:\\s*(\\w+)\\s*$");
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    std::smatch m;
    if (std::regex_search(line, m, marker)) out[m[1]] = n;
  }
  return out;
}

// A frame's text for the checks: "func:line" of a Python frame.
std::string PyAt(const Frame& f) { return f.func + ":" + std::to_string(f.line); }

// The Python frames of a stack, innermost first, as "func:line".
std::vector<std::string> PythonPart(const Job& job, const ThreadStack& t) {
  std::vector<std::string> out;
  for (uint32_t id : t.frames) {
    if (job.frames[id].lang == Frame::Lang::kPython) out.push_back(PyAt(job.frames[id]));
  }
  return out;
}

bool HasMpi4py() {
  return RunProgram({kDebianPython, "-c", "import mpi4py.MPI"}, {}, 30).exit_code == 0;
}

// --- mpi4py -------------------------------------------------------------------

TEST(PythonMpi, SeedHangInMpi4pyIsDiagnosedWithPythonLines) {
  if (!HasMpi4py()) GTEST_SKIP() << "python3-mpi4py is not installed (scripts/setup.sh installs it)";
  TempDir dir;
  const std::string script = kScripts + "/seed_hang.py";
  const auto at = Markers(script);
  // Rank 3 (a last stage) skips its loss broadcast at step 2: rank 2 waits
  // in the broadcast, ranks 0, 1, 3 in the world all-reduce. The watchdog
  // (1 s) captures every rank's stacks; the job is ended after.
  ProgramResult r = RunProgram({"mpirun", "-np", "4", "--oversubscribe", HT_CLI, "run", "--dir", dir.path(), "--job",
                                "job", "--timeout", "1", "--", kDebianPython, script, "--hang-rank", "3",
                                "--hang-step", "2"},
                               testing::kMpiAsRoot, 8);
  EXPECT_EQ(r.err.find("not traced"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("no Open MPI"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("watchdog"), std::string::npos) << r.err;
  Job job = LoadJob({dir.path()});
  Diagnosis d = Diagnose(job);
  ASSERT_EQ(job.world_size, 4) << r.err;
  EXPECT_EQ(VerdictName(d.verdict), "hang") << d.summary;
  ASSERT_EQ(d.culprits.size(), 1u) << d.summary;
  EXPECT_EQ(d.culprits[0].rank, 3);
  EXPECT_NE(d.culprits[0].why.find("never entered MPI_Bcast #3 on pp1"), std::string::npos) << d.culprits[0].why;
  // Where, in the program: the culprit went on to the done all-reduce.
  EXPECT_NE(d.culprits[0].why.find("at train_step (seed_hang.py:" + std::to_string(at.at("done")) + ")"),
            std::string::npos)
      << d.culprits[0].why;
  for (const RankView& v : job.ranks) {
    ASSERT_GE(v.user_frame, 0) << "rank " << v.rank << " has no Python frame";
    const Frame& f = job.frames[size_t(v.user_frame)];
    if (v.rank == 2) {
      EXPECT_EQ(job.names[v.current.name], "MPI_Bcast");
      EXPECT_EQ(PyAt(f), "_aggregate_total_loss:" + std::to_string(at.at("bcast")));
    } else {
      EXPECT_EQ(job.names[v.current.name], "MPI_Allreduce") << "rank " << v.rank;
      EXPECT_EQ(PyAt(f), "train_step:" + std::to_string(at.at("done"))) << "rank " << v.rank;
    }
  }
  // The line after the verdict names the waiting rank's Python function too.
  std::string notes;
  for (const std::string& n : d.notes) notes += n + "\n";
  // (The job has ended when it is read: where rank 2 was then.)
  EXPECT_NE(notes.find("rank 2 was waiting in MPI_Bcast #3 on pp1 root rank 3 at _aggregate_total_loss (seed_hang.py:" +
                       std::to_string(at.at("bcast")) + ")"),
            std::string::npos)
      << notes;
  // The merged stack tree is mixed: Python frames between native ones.
  std::string tree = StackTreeText(MergeStacks(job));
  EXPECT_NE(tree.find("main (seed_hang.py:"), std::string::npos) << tree;
  // Rank 2's native frames show where it waits, unless its capture could
  // not read them (a rank yielding beside busy processes may not run in
  // user mode while looked at, and is then not signalled): the report
  // then says so, and the tree says the frames are missing.
  const ThreadStack* waiting = ThreadOrFirst(job.ranks[2].stacks, job.ranks[2].pid);
  ASSERT_NE(waiting, nullptr) << tree;
  if (waiting->not_read.empty()) {
    EXPECT_NE(tree.find("PMPI_Bcast"), std::string::npos) << tree;
  } else {
    const auto unread = UnreadNativeStacks(job);
    EXPECT_TRUE(std::any_of(unread.begin(), unread.end(),
                            [&](const UnreadStacks& u) { return u.main_thread.Contains(2) && u.why == waiting->not_read; }))
        << UnreadStacksText(unread);
    EXPECT_NE(tree.find("[native frames not read]"), std::string::npos) << tree;
  }
  EXPECT_EQ(tree.find("_PyEval_EvalFrameDefault"), std::string::npos) << "evaluation loops stay unreplaced:\n" << tree;
}

// The same hang written with mpi4py's lowercase object API: comm.bcast and
// comm.allreduce of Python objects, which mpi4py builds from point-to-point
// messages and broadcasts on a duplicate of the communicator of its own. A
// rank held in such a message by a peer in a collective it is no member of
// skipped nothing; the rank that skipped its broadcast is named, whichever
// pipeline it is in (it was the held rank and its peer, three sessions running).
TEST(PythonMpi, SeedHangWrittenWithObjectCollectivesNamesTheRankThatSkipped) {
  if (!HasMpi4py()) GTEST_SKIP() << "python3-mpi4py is not installed";
  const std::string script = kScripts + "/seed_hang.py";
  const auto at = Markers(script);
  for (const int hang_rank : {1, 3}) {
    TempDir dir;
    ProgramResult r = RunProgram({"mpirun", "-np", "4", "--oversubscribe", HT_CLI, "run", "--dir", dir.path(), "--job",
                                  "job", "--timeout", "1", "--", kDebianPython, script, "--objects", "--hang-rank",
                                  std::to_string(hang_rank), "--hang-step", "2"},
                                 testing::kMpiAsRoot, 8);
    Job job = LoadJob({dir.path()});
    Diagnosis d = Diagnose(job);
    ASSERT_EQ(job.world_size, 4) << r.err;
    EXPECT_EQ(VerdictName(d.verdict), "hang") << d.summary;
    ASSERT_EQ(d.culprits.size(), 1u) << d.summary;
    EXPECT_EQ(d.culprits[0].rank, hang_rank) << d.summary;
    EXPECT_NE(d.culprits[0].why.find("never entered MPI_Bcast #5 on pp"), std::string::npos) << d.culprits[0].why;
    // Its partner waits at the broadcast's line.
    const RankView& partner = job.ranks[size_t(hang_rank - 1)];
    ASSERT_GE(partner.user_frame, 0);
    EXPECT_EQ(PyAt(job.frames[size_t(partner.user_frame)]),
              "_aggregate_total_loss_objects:" + std::to_string(at.at("bcast_objects")));
  }
}

TEST(PythonMpi, LiveDumpOfAnMpi4pyHangNamesPythonFrames) {
  if (!HasMpi4py()) GTEST_SKIP() << "python3-mpi4py is not installed";
  TempDir dir, out;
  const std::string script = kScripts + "/seed_hang.py";
  const auto at = Markers(script);
  // No watchdog, no stacks in the process: the frames must come from the dump.
  Started job({"mpirun", "-np", "4", "--oversubscribe", HT_CLI, "run", "--dir", dir.path(), "--job", "job",
               "--timeout", "0", "--no-stacks", "--", kDebianPython, "-u", script, "--hang-rank", "3", "--hang-step",
               "2"},
              testing::kMpiAsRoot);
  ASSERT_TRUE(job.WaitFor("step 1 loss", 30)) << job.out();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // Two dumps a moment apart: with no watchdog and a call too new to the
  // ranks' rings to know how long it takes, one look cannot tell a hang
  // from a job at work; two where nobody moved can.
  TempDir first;
  ProgramResult dump =
      RunProgram({HT_CLI, "dump", "--dir", dir.path(), "--job", "job", "--out", first.path(), "--looks", "1"}, {}, 60);
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  Diagnosis one = Diagnose(LoadJob({first.path()}));
  EXPECT_EQ(VerdictName(one.verdict), "unknown") << one.summary;
  EXPECT_TRUE(one.culprits.empty()) << one.summary;
  EXPECT_NE(one.evidence.find("too new to their rings"), std::string::npos) << one.evidence;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  dump = RunProgram({HT_CLI, "dump", "--dir", dir.path(), "--job", "job", "--out", out.path(), "--looks", "1"}, {}, 60);
  ASSERT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_EQ(dump.err.find("Python frames"), std::string::npos) << dump.err;
  Job j = LoadJob({out.path()});
  Job earlier = LoadJob({first.path()});
  Diagnosis d = Diagnose(j, &earlier);
  EXPECT_EQ(VerdictName(d.verdict), "hang") << d.summary;
  ASSERT_EQ(d.culprits.size(), 1u) << d.summary;
  EXPECT_EQ(d.culprits[0].rank, 3);
  ASSERT_EQ(j.ranks.size(), 4u);
  ASSERT_GE(j.ranks[2].user_frame, 0);
  EXPECT_EQ(PyAt(j.frames[size_t(j.ranks[2].user_frame)]), "_aggregate_total_loss:" + std::to_string(at.at("bcast")));
}

TEST(PythonMpi, HealthyJobWithEveryCommunicatorCallRunsAsUntraced) {
  if (!HasMpi4py()) GTEST_SKIP() << "python3-mpi4py is not installed";
  TempDir dir;
  const std::string script = kScripts + "/comm_calls.py";
  ProgramResult plain = RunProgram({"mpirun", "-np", "4", "--oversubscribe", kDebianPython, script}, testing::kMpiAsRoot, 60);
  ProgramResult traced = RunProgram({"mpirun", "-np", "4", "--oversubscribe", HT_CLI, "run", "--dir", dir.path(), "--job",
                                     "job", "--", kDebianPython, script},
                                    testing::kMpiAsRoot, 60);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  ASSERT_EQ(traced.exit_code, 0) << traced.err;  // Set_name under mpi4py once died of SIGSEGV here
  EXPECT_EQ(traced.out, plain.out);
  EXPECT_EQ(traced.err.find("hangtrace:"), std::string::npos) << traced.err;
  Job job = LoadJob({dir.path()});
  Diagnosis d = Diagnose(job);
  EXPECT_EQ(VerdictName(d.verdict), "no-hang") << d.summary;
  EXPECT_EQ(d.summary, "every rank exited");
  std::set<std::string> calls, labels;
  for (const std::string& f : testing::ListTraceFiles(dir.path())) {
    std::string err;
    auto s = ReadTraceFile(f, &err);
    ASSERT_TRUE(s) << err;
    if (s->process.forked) continue;
    EXPECT_EQ(s->events_rejected, 0u);
    EXPECT_EQ(s->header.counters.dropped, 0u) << f;
    for (const Event& e : s->events) calls.insert(s->CallName(e.rec.call));
    for (size_t i = 0; i < s->comms.size(); ++i) {
      if (s->comm_valid[i]) labels.insert(s->CommLabel(uint16_t(i)));
    }
    // Nothing lost: every nonblocking post is retired.
    std::map<uint64_t, int> open;
    for (const Event& e : s->events) {
      const CallDesc* c = s->Call(e.rec.call);
      if (!c || !(c->flags & fmt::kCallNonblocking)) continue;
      open[e.rec.handle] += e.rec.kind == uint8_t(fmt::EventKind::kBegin) ? 1 : -1;
    }
    for (const auto& [h, n] : open) EXPECT_EQ(n, 0) << f;
  }
  for (const char* c : {"MPI_Init_thread", "MPI_Comm_split", "MPI_Comm_dup", "MPI_Comm_create", "MPI_Comm_create_group",
                        "MPI_Comm_free", "MPI_Allreduce", "MPI_Bcast", "MPI_Barrier", "MPI_Isend", "MPI_Irecv",
                        "MPI_Waitall", "MPI_Finalize"}) {
    EXPECT_TRUE(calls.count(c)) << c;
  }
  for (const char* l : {"world", "half0", "half1", "dup", "created"}) EXPECT_TRUE(labels.count(l)) << l;
}

// --- every CPython on this machine -------------------------------------------------

// The interpreter of a version ("3.12"): pyenv's, or Debian's for "debian".
std::string Interpreter(const std::string& version) {
  if (version == "debian") return kDebianPython;
  const char* home = getenv("PYENV_ROOT");
  std::string root = home ? home : std::string(getenv("HOME") ? getenv("HOME") : "/root") + "/.pyenv";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(root + "/versions", ec)) {
    std::string name = e.path().filename();
    if (name.rfind(version + ".", 0) == 0) {
      std::string bin = e.path().string() + "/bin/python" + version;
      if (access(bin.c_str(), X_OK) == 0) return bin;
    }
  }
  return "";
}

struct FramesCase {
  const char* version;
  bool outside;  // the dump reads its frames from outside (3.10+)
};
void PrintTo(const FramesCase& c, std::ostream* os) { *os << c.version << (c.outside ? " (outside)" : ""); }

class PythonVersions : public ::testing::TestWithParam<FramesCase> {
 protected:
  void SetUp() override {
    python_ = Interpreter(GetParam().version);
    if (python_.empty()) GTEST_SKIP() << "CPython " << GetParam().version << " is not installed (pyenv)";
    at_ = Markers(script_);
  }
  // frames_prog.py under hangtrace run, until it is parked. `stacks`: the
  // runtime may capture stacks (watchdog after 1 s, dump requests).
  std::unique_ptr<Started> Start(const TempDir& dir, bool stacks) {
    auto p = std::make_unique<Started>(
        std::vector<std::string>{HT_CLI, "run", "--dir", dir.path(), "--job", "job", "--timeout", stacks ? "1" : "0",
                                 "--", python_, "-u", script_},
        std::vector<std::pair<std::string, std::string>>{{"RANK", "0"}, {"WORLD_SIZE", "1"},
                                                         {"HANGTRACE_STACKS", stacks ? "1" : "0"},
                                                         {"HANGTRACE_REPORT", "0"}});
    EXPECT_TRUE(p->WaitFor("ready", 30)) << p->out();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // into event.wait()
    // Its runtime has noticed the interpreter (what a dump asks about).
    for (int i = 0; i < 100; ++i) {
      bool noticed = false;
      for (const std::string& f : testing::ListTraceFiles(dir.path())) {
        std::string err;
        auto s = ReadTraceFile(f, &err);
        noticed |= s && s->process.python_version != 0;
      }
      if (noticed) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return p;
  }
  // The two threads as the test expects them, innermost first.
  std::vector<std::string> MainThread() const {
    return {"wait_for_data:" + std::to_string(at_.at("wait_for_data")), "train_step:" + std::to_string(at_.at("train_step")),
            "main:" + std::to_string(at_.at("main")), "<module>:" + std::to_string(at_.at("module"))};
  }
  std::string Prefetch() const { return "prefetch:" + std::to_string(at_.at("prefetch")); }

  // Checks a job's stacks: the main thread's Python frames end with
  // MainThread() (threading's own frames come first), another thread is in
  // prefetch, and Python frames sit between native frames.
  void CheckStacks(const Job& job, const std::string& how) {
    ASSERT_EQ(job.ranks.size(), 1u) << how;
    const RankView& v = job.ranks[0];
    bool main_seen = false, prefetch_seen = false;
    for (const ThreadStack& t : v.stacks) {
      std::vector<std::string> py = PythonPart(job, t);
      const auto want = MainThread();
      if (py.size() >= want.size() && std::equal(want.begin(), want.end(), py.end() - long(want.size()))) {
        main_seen = true;
        // Mixed: native frames (the lock wait) inside, and (the interpreter's
        // entry) outside the Python frames.
        ASSERT_FALSE(t.frames.empty());
        EXPECT_NE(job.frames[t.frames.front()].lang, Frame::Lang::kPython) << how;
        EXPECT_NE(job.frames[t.frames.back()].lang, Frame::Lang::kPython) << how;
      }
      if (!py.empty() && py.front() == Prefetch()) prefetch_seen = true;
      // Named from the files (libdw), not by the nearest dynamic symbol,
      // which once called start_thread pthread_condattr_setpshared and the
      // frame under main __libc_init_first.
      for (uint32_t id : t.frames) {
        EXPECT_NE(job.frames[id].func, "pthread_condattr_setpshared") << how;
        EXPECT_NE(job.frames[id].func, "__libc_init_first") << how;
      }
    }
    EXPECT_TRUE(main_seen) << how << ": no thread with Python frames " << ::testing::PrintToString(MainThread());
    EXPECT_TRUE(prefetch_seen) << how << ": no thread in " << Prefetch();
  }

  std::string python_;
  const std::string script_ = kScripts + "/frames_prog.py";
  std::map<std::string, int> at_;
};

TEST_P(PythonVersions, WatchdogCapturesPythonFramesAndTheyOutliveTheProcess) {
  TempDir dir;
  auto p = Start(dir, true);
  // The watchdog fires after 1 s and captures; wait for its Python frames.
  std::string file;
  for (int i = 0; i < 100 && file.empty(); ++i) {
    for (const std::string& f : testing::ListTraceFiles(dir.path())) {
      std::string err;
      auto s = ReadTraceFile(f, &err);
      if (s && s->process.python_status == uint32_t(fmt::PythonStatus::kCaptured)) file = f;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(file.empty()) << "no Python frames captured by the watchdog";
  CheckStacks(LoadJob({dir.path()}), "running");
  // Dead (SIGKILL): what the file holds is all there is, and is enough.
  kill(p->pid(), SIGKILL);
  p->Wait(10);
  std::string err;
  auto s = ReadTraceFile(file, &err);
  ASSERT_TRUE(s) << err;
  EXPECT_EQ(ProcessLiveness(*s), Liveness::kGone);
  CheckStacks(LoadJob({dir.path()}), "dead");
}

TEST_P(PythonVersions, DumpReadsPythonFramesOfARunningAndAStoppedProcess) {
  TempDir dir;
  // No stacks in the process: what the dump shows it read from outside. For
  // versions the outside reader does not cover, the process's own capture,
  // which the dump asks for, has them.
  const bool outside = GetParam().outside;
  auto p = Start(dir, !outside);
  for (const char* state : {"running", "stopped"}) {
    if (std::string(state) == "stopped") {
      if (!outside) break;  // a stopped process cannot answer a request
      kill(p->pid(), SIGSTOP);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    TempDir out;
    ProgramResult dump =
        RunProgram({HT_CLI, "dump", "--dir", dir.path(), "--job", "job", "--out", out.path(), "--looks", "1"}, {}, 60);
    ASSERT_EQ(dump.exit_code, 0) << dump.err;
    if (outside) EXPECT_EQ(dump.err.find("Python frames"), std::string::npos) << dump.err;
    else EXPECT_NE(dump.err.find("its own capture, taken on request, has them"), std::string::npos) << dump.err;
    CheckStacks(LoadJob({out.path()}), state);
  }
  if (outside) {
    std::string stat = testing::ReadFileText("/proc/" + std::to_string(p->pid()) + "/stat");
    EXPECT_NE(stat.find(") T "), std::string::npos) << "a stopped process must stay stopped: " << stat;
  }
}

INSTANTIATE_TEST_SUITE_P(Cpython, PythonVersions,
                         ::testing::Values(FramesCase{"3.6", false}, FramesCase{"3.7", false}, FramesCase{"3.8", false},
                                           FramesCase{"3.9", false}, FramesCase{"3.10", true}, FramesCase{"3.11", true},
                                           FramesCase{"3.12", true}, FramesCase{"3.13", true},
                                           FramesCase{"debian", true}),
                         [](const auto& info) {
                           std::string v = info.param.version;
                           for (char& c : v) c = c == '.' ? '_' : c;
                           return "python" + v;
                         });

// The Python hook that `hangtrace run` puts on PYTHONPATH leaves every
// CPython here starting as it would untraced: imports work, and the
// program's own sitecustomize (on PYTHONPATH behind ours) still runs.
// Python 2.7 is left unarmed (its imports know no find_spec).
TEST(PythonHook, EveryCpythonStartsAsUntracedAndRunsTheProgramsSitecustomize) {
  TempDir dir, site;
  { std::ofstream(site.path() + "/sitecustomize.py") << "import os\nos.environ['PROGRAM_SITE'] = 'ran'\n"; }
  int checked = 0;
  for (const char* v : {"2.7", "3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13", "debian"}) {
    const std::string python = Interpreter(v);
    if (python.empty()) continue;
    ProgramResult r = RunProgram({HT_CLI, "run", "--dir", dir.path(), "--", python, "-c",
                                  "import json, os; print(os.environ.get('PROGRAM_SITE'))"},
                                 {{"PYTHONPATH", site.path()}}, 60);
    EXPECT_EQ(r.exit_code, 0) << v << ": " << r.err;
    EXPECT_EQ(r.out, "ran\n") << v << ": " << r.err;
    EXPECT_EQ(r.err, "") << v;
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no CPython installed";
}

// The signature the runtime calls _Py_DumpTracebackThreads with was read
// from each version's headers; it must still be what they declare.
TEST(PythonHeaders, DumpTracebackThreadsHasTheSignatureTheRuntimeUses) {
  int checked = 0;
  std::regex decl("const char\\s*\\*\\s*\\)?\\s*_Py_DumpTracebackThreads\\s*\\(\\s*int\\s+fd\\s*,\\s*"
                  "(struct _is|PyInterpreterState)\\s*\\*\\s*interp\\s*,\\s*PyThreadState\\s*\\*\\s*current_tstate\\s*\\)");
  for (const char* v : {"3.6", "3.7", "3.8", "3.9", "3.10", "3.11", "3.12", "3.13"}) {
    std::string python = Interpreter(v);
    if (python.empty() || python == kDebianPython) continue;
    std::filesystem::path include = std::filesystem::path(python).parent_path().parent_path() / "include";
    std::string all;
    std::error_code ec;
    for (const auto& e : std::filesystem::recursive_directory_iterator(include, ec)) {
      if (e.path().extension() == ".h") all += testing::ReadFileText(e.path());
    }
    // Collapse whitespace so a declaration split over lines matches.
    all = std::regex_replace(all, std::regex("\\s+"), " ");
    EXPECT_TRUE(std::regex_search(all, decl)) << "CPython " << v << ": _Py_DumpTracebackThreads changed signature";
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no pyenv CPython installed";
}

}  // namespace
}  // namespace hangtrace
