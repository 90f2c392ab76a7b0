// The MPI interposer under real OpenMPI: tests/mpi/mpi_prog.c runs under
// `mpirun ... hangtrace run -- mpi_prog MODE`, then every rank's trace file
// is read and checked against the others.
#define OMPI_SKIP_MPICXX 1
#include <gtest/gtest.h>
#include <fstream>
#include <sstream>
#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "merger/diagnose.h"
#include "merger/node_dump.h"
#include "merger/report.h"
#include "merger/symbolize.h"
#include "merger/trace_reader.h"
#include "dump/processes.h"
#include "tests/test_util.h"
#include "tracer/procfs.h"

namespace hangtrace {
namespace {

using testing::ProgramResult;
using testing::RunProgram;
using testing::TempDir;

// How the program gets its MPI: linked (libmpi loaded with the program), or
// late (a library dlopen'ed RTLD_LOCAL after start-up, as mpi4py does).
enum class Load { kLinked, kLate };
void PrintTo(Load l, std::ostream* os) { *os << (l == Load::kLate ? "late" : "linked"); }

ProgramResult RunMpi(const TempDir& dir, int np, const std::string& mode, const std::string& timeout = "120",
                     double limit_s = 60, Load load = Load::kLinked, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> argv = {"mpirun", "-np", std::to_string(np), "--oversubscribe", HT_CLI, "run", "--dir",
                                   dir.path(), "--job", "job", "--timeout", timeout, "--"};
  if (load == Load::kLate) {
    argv.insert(argv.end(), {HT_MPI_LATE, HT_MPI_LATE_LIB, mode});
  } else {
    argv.insert(argv.end(), {HT_MPI_PROG, mode});
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  return RunProgram(argv, testing::kMpiAsRoot, limit_s);
}

// Rank -> snapshot, for the files of MPI (or torch.distributed) ranks (not
// fork children).
std::map<int, TraceSnapshot> ReadRanks(const TempDir& dir) {
  std::map<int, TraceSnapshot> out;
  for (const std::string& f : testing::ListTraceFiles(dir.path())) {
    std::string err;
    auto s = ReadTraceFile(f, &err);
    EXPECT_TRUE(s) << err;
    if (!s || s->process.forked) continue;
    if (s->process.rank_source != uint8_t(fmt::RankSource::kMpi) &&
        s->process.rank_source != uint8_t(fmt::RankSource::kTorch)) continue;
    EXPECT_EQ(out.count(s->process.rank), 0u) << "two files claim rank " << s->process.rank;
    out[s->process.rank] = *s;
  }
  return out;
}

bool HasFlag(const TraceSnapshot& s, uint16_t call, uint8_t flag) {
  const CallDesc* c = s.Call(call);
  return c && (c->flags & flag);
}

// Every comm id is held by exactly its members, each at its own index.
void CheckCommIdentity(const std::map<int, TraceSnapshot>& ranks, int np) {
  struct Seen {
    std::vector<int32_t> members;
    std::set<int> holders;
  };
  std::map<uint64_t, Seen> by_id;
  for (const auto& [rank, s] : ranks) {
    for (size_t i = 0; i < s.comms.size(); ++i) {
      if (!s.comm_valid[i]) continue;
      const CommInfo& c = s.comms[i];
      std::vector<int32_t> members = c.members;
      if (c.entry.flags & fmt::kCommWorld) {
        for (int r = 0; r < np; ++r) members.push_back(r);
      }
      ASSERT_EQ(int(members.size()), c.entry.size) << s.CommLabel(uint16_t(i));
      ASSERT_GE(c.entry.my_index, 0);
      ASSERT_LT(c.entry.my_index, c.entry.size);
      EXPECT_EQ(members[size_t(c.entry.my_index)], rank) << "comm " << s.CommLabel(uint16_t(i)) << " on rank " << rank;
      Seen& seen = by_id[c.entry.id];
      if (seen.holders.empty()) seen.members = members;
      EXPECT_EQ(seen.members, members) << "members of comm " << std::hex << c.entry.id << " differ";
      EXPECT_TRUE(seen.holders.insert(rank).second) << "rank " << rank << " holds comm id twice";
    }
  }
  for (const auto& [id, seen] : by_id) {
    std::set<int> members(seen.members.begin(), seen.members.end());
    EXPECT_EQ(seen.holders, members) << "comm " << std::hex << id << ": holders differ from its members";
  }
}

// On every communicator, the collectives each member entered, in order,
// with their sequence numbers and arguments, are the same list.
void CheckCollectiveSequences(const std::map<int, TraceSnapshot>& ranks) {
  using Entry = std::tuple<uint64_t, std::string, uint64_t, int32_t, uint8_t>;
  std::map<uint64_t, std::map<int, std::vector<Entry>>> per_comm;
  for (const auto& [rank, s] : ranks) {
    for (const Event& e : s.events) {
      if (e.rec.kind != uint8_t(fmt::EventKind::kBegin) || !HasFlag(s, e.rec.call, fmt::kCallCollective)) continue;
      const CommInfo* c = s.Comm(e.rec.comm);
      ASSERT_NE(c, nullptr);
      per_comm[c->entry.id][rank].push_back({e.rec.seq, s.CallName(e.rec.call), e.rec.count, e.rec.peer, e.rec.redop});
    }
  }
  ASSERT_FALSE(per_comm.empty());
  for (const auto& [id, by_rank] : per_comm) {
    const auto& first = by_rank.begin()->second;
    for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(std::get<0>(first[i]), i + 1) << "sequence numbers of a comm run 1, 2, ...";
    for (const auto& [rank, list] : by_rank) {
      EXPECT_EQ(list, first) << "rank " << rank << " disagrees on comm " << std::hex << id;
    }
  }
}

// Each send (comm, from, to, tag, seq) has its receive, and back.
void CheckPointToPoint(const std::map<int, TraceSnapshot>& ranks, size_t* pairs) {
  using Key = std::tuple<uint64_t, int32_t, int32_t, int32_t, uint64_t>;
  std::multiset<Key> sends, recvs;
  for (const auto& [rank, s] : ranks) {
    for (const Event& e : s.events) {
      const CallDesc* c = s.Call(e.rec.call);
      const CommInfo* comm = s.Comm(e.rec.comm);
      if (!c || !comm || c->op == fmt::Op::kSendrecv) continue;
      int32_t me = comm->entry.my_index;
      if (c->op == fmt::Op::kSend && e.rec.kind == uint8_t(fmt::EventKind::kBegin)) {
        sends.insert({comm->entry.id, me, e.rec.peer, e.rec.tag, e.rec.seq});
      }
      if (c->op == fmt::Op::kRecv && e.rec.kind == uint8_t(fmt::EventKind::kEnd)) {
        recvs.insert({comm->entry.id, e.rec.peer, me, e.rec.tag, e.rec.seq});
      }
    }
  }
  EXPECT_EQ(sends, recvs);
  for (const Key& k : sends) EXPECT_GT(std::get<4>(k), 0u);
  *pairs = sends.size();
}

// Every nonblocking post is ended by the completion call that retired it.
void CheckRequestsRetired(const std::map<int, TraceSnapshot>& ranks) {
  for (const auto& [rank, s] : ranks) {
    std::map<uint64_t, int> open;
    for (const Event& e : s.events) {
      if (!HasFlag(s, e.rec.call, fmt::kCallNonblocking)) continue;
      if (e.rec.kind == uint8_t(fmt::EventKind::kBegin)) open[e.rec.handle]++;
      if (e.rec.kind == uint8_t(fmt::EventKind::kEnd)) open[e.rec.handle]--;
    }
    for (const auto& [handle, n] : open) EXPECT_EQ(n, 0) << "rank " << rank << " request " << std::hex << handle;
  }
}

class MpiFamilies : public ::testing::TestWithParam<std::tuple<int, Load>> {};

TEST_P(MpiFamilies, RanksAgreeOnCommsSequencesAndPairs) {
  const auto [np, load] = GetParam();
  TempDir dir;
  ProgramResult r = RunMpi(dir, np, "families", "120", 60, load);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.err.find("not traced"), std::string::npos) << r.err;
  auto ranks = ReadRanks(dir);
  ASSERT_EQ(int(ranks.size()), np);
  for (const auto& [rank, s] : ranks) {
    EXPECT_EQ(s.process.world_size, np);
    EXPECT_EQ(fmt::ProcState(s.process.state), fmt::ProcState::kExited);
    EXPECT_EQ(s.events_rejected, 0u);
  }
  CheckCommIdentity(ranks, np);
  CheckCollectiveSequences(ranks);
  size_t pairs = 0;
  CheckPointToPoint(ranks, &pairs);
  EXPECT_GE(pairs, size_t(np) * 8);  // ring x3, tagged isend, persistent x3, probe'd send
  CheckRequestsRetired(ranks);
  // The labels the program set, and the calls of each family.
  std::set<std::string> labels, calls;
  for (const auto& [rank, s] : ranks) {
    for (size_t i = 0; i < s.comms.size(); ++i) {
      if (s.comm_valid[i]) labels.insert(s.CommLabel(uint16_t(i)));
    }
    for (const Event& e : s.events) calls.insert(s.CallName(e.rec.call));
  }
  for (const char* l : {"world", "self", "even", "odd", "dup", "created", "grp", "idup"}) {
    EXPECT_TRUE(labels.count(l)) << l;
  }
  for (const char* c : {"MPI_Init_thread", "MPI_Barrier", "MPI_Allreduce", "MPI_Bcast", "MPI_Reduce",
                        "MPI_Allgather", "MPI_Gather", "MPI_Scatter", "MPI_Alltoall", "MPI_Scan", "MPI_Exscan",
                        "MPI_Reduce_scatter_block", "MPI_Comm_split", "MPI_Comm_dup", "MPI_Comm_create",
                        "MPI_Comm_create_group", "MPI_Comm_idup", "MPI_Comm_free", "MPI_Iallreduce",
                        "MPI_Ibcast", "MPI_Ibarrier", "MPI_Waitall", "MPI_Send", "MPI_Recv", "MPI_Irecv",
                        "MPI_Issend", "MPI_Isend", "MPI_Waitany", "MPI_Wait", "MPI_Sendrecv",
                        "MPI_Sendrecv_replace", "MPI_Probe", "MPI_Send_init", "MPI_Recv_init", "MPI_Finalize"}) {
    EXPECT_TRUE(calls.count(c)) << c;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, MpiFamilies,
                         ::testing::Values(std::tuple{2, Load::kLinked}, std::tuple{4, Load::kLinked},
                                           std::tuple{8, Load::kLinked}, std::tuple{4, Load::kLate}),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) == Load::kLate ? "_late" : "_linked");
                         });

// Every record a torch job's ranks wrote, as text, but for when and on
// which thread: per rank, sorted (a posted call's end may come from the
// thread that completed its work).
std::map<int, std::vector<std::string>> TorchRecords(const std::map<int, TraceSnapshot>& ranks) {
  std::map<int, std::vector<std::string>> out;
  for (const auto& [rank, s] : ranks) {
    for (const Event& e : s.events) {
      const fmt::Record& r = e.rec;
      std::ostringstream line;
      line << int(r.kind) << " " << s.CallName(r.call) << " comm "
           << (r.comm == fmt::kNoComm ? 0 : s.comms[r.comm].entry.id) << " #" << r.seq << " peer " << r.peer
           << " tag " << r.tag << " count " << r.count << " dtype " << int(r.dtype) << " redop " << int(r.redop)
           << " handle " << r.handle << " result " << r.result << " flags " << int(r.flags);
      out[rank].push_back(line.str());
    }
    std::sort(out[rank].begin(), out[rank].end());
  }
  return out;
}

// Whether the system's python3 has torch (Debian's python3-torch).
bool HasTorch() { return RunProgram({"/usr/bin/python3", "-c", "import torch.distributed"}, {}, 60).exit_code == 0; }

// tests/python/SCRIPT as one traced process (a gloo world of one, its
// rendezvous file in DIR), through the hook's record path `path` ("1": the
// C++ one, "ctypes"), with `args` after the rendezvous file.
ProgramResult RunTorchScript(const TempDir& dir, const std::string& script, const std::string& path,
                             const std::vector<std::string>& args = {}) {
  std::vector<std::string> argv = {HT_CLI, "run", "--dir", dir.path(), "--job", "job", "--", "/usr/bin/python3",
                                   std::string(HT_SOURCE_DIR) + "/tests/python/" + script, dir.path() + "/init"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProgram(argv, {{"HANGTRACE_KEEP", "1"}, {"HANGTRACE_TORCH", path}}, 120);
}

// torch.distributed on gloo (Debian's python3-torch), every family of its
// calls, traced by the Python hook: the ranks agree on each process
// group's id and members, its collectives in order with their arguments,
// each send's receive (any source resolved), and every posted call ends.
// The hook's ctypes fallback (HANGTRACE_TORCH=ctypes) writes the same
// records as its C++ record path. The program's own sitecustomize (on
// PYTHONPATH) still runs. With HANGTRACE_TORCH=0 nothing of torch is
// recorded.
TEST(Torch, EveryCallFamilyIsTracedAsMpisAre) {
  if (!HasTorch()) GTEST_SKIP() << "python3-torch is not installed (./scripts/setup.sh installs it)";
  TempDir dir, site;
  {
    std::ofstream(site.path() + "/sitecustomize.py") << "import builtins; builtins.torch_calls_site = True\n";
  }
  const std::string port = std::to_string(20000 + getpid() % 20000);
  auto run = [&](const TempDir& into, const std::string& torch_setting) {
    return RunProgram({"mpirun", "-np", "4", "--oversubscribe", "-x", "MASTER_PORT=" + port, "-x",
                       "TORCH_CALLS_SITE=1", "-x", "PYTHONPATH=" + site.path(), "-x", "HANGTRACE_TORCH=" + torch_setting,
                       HT_CLI, "run", "--dir", into.path(), "--job", "job", "--", "/usr/bin/python3",
                       std::string(HT_SOURCE_DIR) + "/tests/python/torch_calls.py"},
                      testing::kMpiAsRoot, 120);
  };
  ProgramResult r = run(dir, "1");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.err.find("hangtrace:"), std::string::npos) << r.err;
  auto ranks = ReadRanks(dir);
  ASSERT_EQ(ranks.size(), 4u);
  for (const auto& [rank, s] : ranks) {
    EXPECT_EQ(s.process.rank_source, uint8_t(fmt::RankSource::kTorch));
    EXPECT_EQ(s.process.world_size, 4);
  }
  CheckCommIdentity(ranks, 4);
  CheckCollectiveSequences(ranks);
  size_t pairs = 0;
  CheckPointToPoint(ranks, &pairs);
  EXPECT_EQ(pairs, 16u);  // the ring 4, posted 4, to rank 0 from any source 3, batched 4, within the evens 1
  CheckRequestsRetired(ranks);
  std::set<std::string> labels, calls;
  std::set<uint64_t> ids;
  for (const auto& [rank, s] : ranks) {
    for (size_t i = 0; i < s.comms.size(); ++i) {
      if (!s.comm_valid[i]) continue;
      labels.insert(s.CommLabel(uint16_t(i)));
      ids.insert(s.comms[i].entry.id);
    }
    for (const Event& e : s.events) calls.insert(s.CallName(e.rec.call));
  }
  EXPECT_TRUE(labels.count("default_pg"));
  EXPECT_EQ(ids.size(), 4u);  // default, evens, odds, everyone (same members as the default, another group)
  for (const char* c : {"dist.all_reduce", "dist.broadcast", "dist.reduce", "dist.all_gather", "dist.gather",
                        "dist.scatter", "dist.all_to_all_single", "dist.barrier", "dist.monitored_barrier",
                        "dist.all_gather_object", "dist.broadcast_object_list", "dist.gather_object",
                        "dist.scatter_object_list", "dist.all_reduce async", "dist.broadcast async",
                        "dist.Work.wait", "dist.send", "dist.recv", "dist.isend", "dist.irecv"}) {
    EXPECT_TRUE(calls.count(c)) << c;
  }
  // Through ctypes: the same records, rank by rank.
  TempDir through_ctypes;
  r = run(through_ctypes, "ctypes");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.err.find("hangtrace:"), std::string::npos) << r.err;
  const auto native = TorchRecords(ranks), fallback = TorchRecords(ReadRanks(through_ctypes));
  ASSERT_EQ(fallback.size(), native.size());
  for (const auto& [rank, records] : native) {
    EXPECT_GT(records.size(), 60u) << rank;  // 66 to 72: every family
    EXPECT_EQ(fallback.at(rank), records) << "rank " << rank;
  }
  // Off: the program runs the same, and no call of torch is recorded.
  TempDir off;
  r = run(off, "0");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(testing::ListTraceFiles(off.path()).empty());
}

// Two threads of one rank, one group each: a float32 tensor subclass whose
// numel() lets the other thread (int64) run while the hook records the
// call. Every record carries its own call's count and dtype, through both
// of the hook's paths (the C++ one once read the dtype code after numel(),
// from whichever call the other thread had just made).
TEST(Torch, ThreadsSwitchingInsideTheHookKeepTheirOwnRecords) {
  if (!HasTorch()) GTEST_SKIP() << "python3-torch is not installed (./scripts/setup.sh installs it)";
  for (const std::string path : {"1", "ctypes"}) {
    TempDir dir;
    ProgramResult r = RunTorchScript(dir, "torch_threads.py", path, {"2000"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(r.err, "");
    const auto files = testing::ListTraceFiles(dir.path());
    ASSERT_EQ(files.size(), 1u);
    std::string err;
    auto s = ReadTraceFile(files[0], &err);
    ASSERT_TRUE(s) << err;
    std::map<uint32_t, std::map<std::string, int>> by_thread;  // tid -> "count dtype" -> records
    for (const Event& e : s->events) {
      if (s->CallName(e.rec.call) != "dist.all_reduce") continue;
      by_thread[e.rec.tid][std::to_string(e.rec.count) + " " + fmt::DtypeName(fmt::Dtype(e.rec.dtype))]++;
    }
    std::set<std::string> seen;
    for (const auto& [tid, kinds] : by_thread) {
      EXPECT_EQ(kinds.size(), 1u) << path << ": thread " << tid << " recorded calls of another";
      for (const auto& [kind, n] : kinds) {
        seen.insert(kind);
        EXPECT_EQ(n, 4000) << path << ": " << kind;  // a BEGIN and an END per call
      }
    }
    EXPECT_EQ(seen, (std::set<std::string>{"3 float32", "7 int64"})) << path;
  }
}

// A call torch rejects is the program's own error: no word from hangtrace
// (it once said "not traced" there). A call that goes through while the
// hook could not read it (a tensor subclass whose numel() raises) is said,
// once. Both record paths.
TEST(Torch, OnlyACallThatWentThroughUntracedIsSaid) {
  if (!HasTorch()) GTEST_SKIP() << "python3-torch is not installed (./scripts/setup.sh installs it)";
  for (const std::string path : {"1", "ctypes"}) {
    TempDir dir;
    ProgramResult r = RunTorchScript(dir, "torch_rejected.py", path);
    ASSERT_EQ(r.exit_code, 0) << path << ": " << r.out << r.err;
    EXPECT_EQ(r.out, "rejected: AttributeError\nwent through: [1.0, 1.0]\n") << path;
    EXPECT_EQ(r.err, "hangtrace: torch.distributed calls are not traced: ValueError: numel refused\n") << path;
  }
}

// A call torch refuses before it issues anything (an invalid root or
// peer, blocking or posted) took a sequence number on the rank that made
// it and on no other: every later collective was off by one there, and a
// hang read as a mismatch naming that rank. It gives its number back, and
// its END says it was never issued; on both record paths.
TEST(Torch, CallsTorchRefusesTakeNoSequenceNumber) {
  if (!HasTorch()) GTEST_SKIP() << "python3-torch is not installed (./scripts/setup.sh installs it)";
  for (const std::string path : {"1", "ctypes"}) {
    TempDir dir;
    ProgramResult r = RunTorchScript(dir, "torch_refused.py", path);
    ASSERT_EQ(r.exit_code, 0) << path << ": " << r.out << r.err;
    EXPECT_EQ(r.out, "refused: RuntimeError\nrefused: IndexError\nrefused: RuntimeError\ndone\n") << path;
    EXPECT_EQ(r.err, "") << path;
    std::string err;
    const auto files = testing::ListTraceFiles(dir.path());
    ASSERT_EQ(files.size(), 1u) << path;
    auto s = ReadTraceFile(files[0], &err);
    ASSERT_TRUE(s) << err;
    EXPECT_EQ(s->header.counters.calls_not_issued, 3u) << path;
    std::vector<std::string> begins, refused_ends;
    for (const Event& e : s->events) {
      const std::string name = s->CallName(e.rec.call);
      if (name.rfind("dist.", 0) != 0) continue;
      if (e.rec.kind == uint8_t(fmt::EventKind::kBegin)) begins.push_back(name + " #" + std::to_string(e.rec.seq));
      if (e.rec.kind == uint8_t(fmt::EventKind::kEnd) && (e.rec.flags & fmt::kRecNotIssued)) refused_ends.push_back(name);
    }
    // (The isend names no member: it has no stream, and no number.)
    EXPECT_EQ(begins, (std::vector<std::string>{"dist.broadcast #1", "dist.isend #0", "dist.broadcast async #1",
                                                "dist.all_reduce #1", "dist.broadcast #2"}))
        << path;
    EXPECT_EQ(refused_ends, (std::vector<std::string>{"dist.broadcast", "dist.isend", "dist.broadcast async"})) << path;
    Diagnosis d = Diagnose(LoadJob({dir.path()}));
    EXPECT_TRUE(d.mismatches.empty()) << path << ": " << d.summary;
    EXPECT_EQ(VerdictName(d.verdict), "no-hang") << path << ": " << d.summary;
  }
}

// torch 2.x's API (group_src/group_dst, a group's description, Work) on
// the FAKE torch of tests/fakes/torch2 (Debian 12 ships torch 1.13 only):
// one process, rank 2 of 4; each record as the hook must write it, through
// its C++ record path, through ctypes where chosen, and through ctypes
// with one line where the C++ module cannot load (a library whose hook
// folder holds a broken one).
class TorchHook : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchHook, FollowsTorch2sApiOnAFake) {
  TempDir dir, broken;
  std::vector<std::pair<std::string, std::string>> env = {
      {"PYTHONPATH", std::string(HT_SOURCE_DIR) + "/tests/fakes/torch2"}, {"HANGTRACE_KEEP", "1"}};
  std::string want_err;
  if (GetParam() == "ctypes") env.push_back({"HANGTRACE_TORCH", "ctypes"});
  if (GetParam() == "broken") {
    const std::string preload = HT_PRELOAD, lib = preload.substr(0, preload.rfind('/'));
    ASSERT_EQ(RunProgram({"cp", "-r", lib + "/hangtrace", broken.path() + "/hangtrace"}, {}, 30).exit_code, 0);
    ASSERT_EQ(symlink((lib + "/libhangtrace.so").c_str(), (broken.path() + "/libhangtrace.so").c_str()), 0);
    ProgramResult so = RunProgram({"/usr/bin/python3", "-c",
                                   "import importlib.machinery as m; print('_hangtrace_torch' + m.EXTENSION_SUFFIXES[0])"},
                                  {}, 30);
    std::ofstream(broken.path() + "/hangtrace/python/" + so.out.substr(0, so.out.find('\n'))) << "not ELF\n";
    env.push_back({"HANGTRACE_LIB", broken.path() + "/libhangtrace.so"});
    want_err = "hangtrace: torch.distributed calls are recorded through ctypes";
  }
  ProgramResult r = RunProgram({HT_CLI, "run", "--dir", dir.path(), "--job", "job", "--", "/usr/bin/python3",
                                std::string(HT_SOURCE_DIR) + "/tests/python/torch2_api.py"},
                               env, 60);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  if (want_err.empty()) {
    EXPECT_EQ(r.err, "");
  } else {  // one line, saying why
    EXPECT_EQ(r.err.rfind(want_err, 0), 0u) << r.err;
    EXPECT_NE(r.err.find("_hangtrace_torch did not load: ImportError"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  const auto files = testing::ListTraceFiles(dir.path());
  ASSERT_EQ(files.size(), 1u);
  std::string err;
  auto s = ReadTraceFile(files[0], &err);
  ASSERT_TRUE(s) << err;
  EXPECT_EQ(s->process.rank, 2);
  EXPECT_EQ(s->process.rank_source, uint8_t(fmt::RankSource::kTorch));
  std::vector<std::string> got;
  for (const Event& e : s->events) {
    if (e.rec.kind != uint8_t(fmt::EventKind::kEnd)) continue;
    std::ostringstream line;
    line << s->CallName(e.rec.call) << " #" << e.rec.seq << " on "
         << (e.rec.comm == fmt::kNoComm ? "-" : s->CommLabel(e.rec.comm)) << " peer " << e.rec.peer << " tag "
         << e.rec.tag << " count " << e.rec.count << " " << fmt::DtypeName(fmt::Dtype(e.rec.dtype)) << " "
         << fmt::RedopName(fmt::Redop(e.rec.redop));
    got.push_back(line.str());
  }
  const std::vector<std::string> want = {
      "dist.all_reduce #1 on default_pg peer -1 tag 0 count 16 bfloat16 max",
      "dist.broadcast #1 on tp peer 0 tag 0 count 16 bfloat16 none",  // group_src=0
      "dist.send #1 on tp peer 0 tag 3 count 16 bfloat16 none",       // group_dst=0
      "dist.recv #1 on tp peer 0 tag 0 count 16 bfloat16 none",       // src=1: the pair's rank 0
      "dist.recv #1 on default_pg peer 3 tag 0 count 16 bfloat16 none",  // any source, resolved
      "dist.Work.wait #0 on - peer -1 tag 0 count 1 none none",
      "dist.all_reduce async #2 on default_pg peer -1 tag 0 count 16 bfloat16 sum",
      "dist.irecv #2 on tp peer 0 tag 0 count 16 bfloat16 none",      // ended by is_completed()
      "dist.barrier #3 on default_pg peer -1 tag 0 count 0 none none",
  };
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(Torch, TorchHook, ::testing::Values("native", "ctypes", "broken"),
                         [](const auto& info) { return info.param; });

TEST(Mpi, EveryWrapperPassesThroughWhenTracingIsOffOrCouldNotStart) {
  // Every wrapped call (the families program calls nearly all of them),
  // libmpi linked or loaded late, with the runtime off, and with a runtime
  // that could not start (no trace folder): the program runs as untraced.
  for (Load load : {Load::kLinked, Load::kLate}) {
    for (const auto& [var, value] : std::vector<std::pair<std::string, std::string>>{
             {"HANGTRACE_OFF", "1"}, {"HANGTRACE_DIR", "/proc/no-such-folder"}}) {
      TempDir dir;
      std::vector<std::string> argv = {"mpirun", "-np", "4", "--oversubscribe", "-x", var + "=" + value, HT_CLI, "run",
                                       "--job", "job"};
      // Off: the trace folder is a real one, and must stay empty. (With
      // the folder that cannot be made, `run --dir` would override it.)
      const bool off = var == "HANGTRACE_OFF";
      if (off) argv.insert(argv.end(), {"--dir", dir.path()});
      argv.push_back("--");
      if (load == Load::kLate) argv.insert(argv.end(), {HT_MPI_LATE, HT_MPI_LATE_LIB, "families"});
      else argv.insert(argv.end(), {HT_MPI_PROG, "families"});
      ProgramResult r = RunProgram(argv, testing::kMpiAsRoot, 60);
      EXPECT_EQ(r.exit_code, 0) << var << "=" << value << (load == Load::kLate ? " late" : " linked") << ": " << r.err;
      EXPECT_TRUE(testing::ListTraceFiles(dir.path()).empty());
      if (!off) {
        EXPECT_NE(r.err.find("not tracing pid"), std::string::npos) << "why it runs untraced: " << r.err;
      }
    }
  }
}

// tests/mpi/signals_prog.c MODE on one rank, traced or not; in the term
// modes the rank gets a SIGTERM once it says it is ready.
struct SignalsRun {
  int exit_code = -1;
  std::string out;
};
SignalsRun RunSignals(const std::string& mode, bool traced, const TempDir& dir) {
  std::vector<std::string> argv = {"mpirun", "-np", "1"};
  if (traced) argv.insert(argv.end(), {HT_CLI, "run", "--dir", dir.path(), "--job", "job", "--"});
  argv.insert(argv.end(), {HT_SIGNALS_PROG, mode});
  testing::Started p(argv, testing::kMpiAsRoot);
  if (mode.rfind("term-", 0) == 0) {
    EXPECT_TRUE(p.WaitFor("ready ", 60)) << p.out();
    const size_t at = p.out().find("ready ");
    const pid_t pid = at == std::string::npos ? 0 : pid_t(atoi(p.out().c_str() + at + 6));
    usleep(200 * 1000);  // into its read()
    if (pid > 0) kill(pid, SIGTERM);
  }
  SignalsRun r;
  r.exit_code = p.Wait(60);
  r.out = p.out();
  // The pid differs run to run.
  const size_t at = r.out.find("ready ");
  if (at != std::string::npos) r.out.replace(at, r.out.find('\n', at) - at, "ready PID");
  return r;
}

// many-comms sends one message from rank 0 to rank 1 on each communicator
// (tag 3):
// each must be its stream's first (sequence number 1) on both sides, and
// more than `at_least` of them are in the lanes.
void ExpectEveryMessageFirstOfItsStream(const TempDir& dir, size_t at_least) {
  auto ranks = ReadRanks(dir);
  for (int rank : {0, 1}) {
    const char* call = rank == 0 ? "MPI_Send" : "MPI_Recv";
    size_t seen = 0;
    for (const Event& e : ranks.at(rank).events) {
      if (ranks.at(rank).CallName(e.rec.call) != call || e.rec.kind != uint8_t(fmt::EventKind::kBegin)) continue;
      if (e.rec.tag != 3) continue;  // the hang's steps send on world with tag 7
      ++seen;
      EXPECT_EQ(e.rec.seq, 1u) << call << " #" << seen << " on rank " << rank;
      if (e.rec.seq != 1u) break;
    }
    EXPECT_GT(seen, at_least) << call;
  }
}

// Runs mpi_prog MODE traced (watchdog 1 s) until it prints "stuck", then,
// past the watchdog, reads its live files `looks` times `gap_ms` apart: each
// look must say hang with `rank` the one culprit, its reason holding every
// one of `words`.
void ExpectTheSameCulpritAtEveryLook(const std::string& mode, int looks, int gap_ms, int32_t rank,
                                     const std::vector<std::string>& words) {
  TempDir dir;
  testing::Started job({"mpirun", "-np", "4", "--oversubscribe", HT_CLI, "run", "--dir", dir.path(), "--job", "job",
                        "--timeout", "1", "--", HT_MPI_PROG, mode},
                       testing::kMpiAsRoot);
  ASSERT_TRUE(job.WaitFor("stuck", 120)) << job.out();
  usleep(1500 * 1000);  // past the watchdog's second
  for (int look = 0; look < looks; ++look) {
    Diagnosis d = Diagnose(LoadJob({dir.path()}));
    EXPECT_EQ(VerdictName(d.verdict), "hang") << d.summary;
    ASSERT_EQ(d.culprits.size(), 1u) << mode << ", look " << look << ": " << d.summary;
    EXPECT_EQ(d.culprits[0].rank, rank) << d.summary;
    for (const std::string& w : words) EXPECT_NE(d.culprits[0].why.find(w), std::string::npos) << d.culprits[0].why;
    usleep(gap_ms * 1000);
  }
}

// Each thread is its own waiter: a heartbeat thread that all-reduces on a
// communicator of its own every 0.1 s is inside one of them most of the
// time. Rank 3 skips a barrier on world and sleeps; its heartbeat goes on.
// Taken for rank 3's position, the heartbeat's young all-reduce (waiting
// for rank 0's, which is a moment late) named rank 0, innocent, in its
// barrier. Looked at ten times, a tenth of a second apart: rank 3 alone,
// said from its main thread: the barrier it left (#2-#4: MPI_Comm_dup is
// #1), not the heartbeat's last call.
TEST(Mpi, AHeartbeatThreadsCallsAreNotWhereTheRankWaits) {
  ExpectTheSameCulpritAtEveryLook("heartbeat", 10, 100, 3,
                                  {"never entered MPI_Barrier #4 on world; not in any traced call for",
                                   "since MPI_Barrier #3 on world returned"});
}

// A thread per communicator: rank 1's thread on B skips its last
// all-reduce while its thread on A goes on all-reducing every 0.1 s; the
// others' threads on B wait for it. Rank 1's young calls on A are not
// where it waits: rank 1 alone, each of five looks.
TEST(Mpi, AThreadPerCommunicatorIsItsOwnWaiter) {
  ExpectTheSameCulpritAtEveryLook("comm-threads", 5, 150, 1, {"never entered MPI_Allreduce #5 on B"});
}

// A program that creates and frees more communicators than a trace file's
// table holds (4,096), then hangs on a new one: freed slots are taken
// again, and the hang is seen on the communicator it is on. Before, past
// the table the new communicator went unrecorded and the verdict was "the
// problem is below MPI" with no culprit and no warning.
TEST(Mpi, ACommunicatorMadeAfterThousandsWereFreedIsStillSeen) {
  TempDir dir;
  testing::Started job({"mpirun", "-np", "4", "--oversubscribe", HT_CLI, "run", "--dir", dir.path(), "--job", "job",
                        "--timeout", "1", "--", HT_MPI_PROG, "many-comms", "5000"},
                       testing::kMpiAsRoot);
  ASSERT_TRUE(job.WaitFor("stuck", 120)) << job.out();
  usleep(1500 * 1000);  // the others reach the barrier, and wait past the watchdog's timeout
  Job loaded = LoadJob({dir.path()});
  Diagnosis d = Diagnose(loaded);
  EXPECT_EQ(VerdictName(d.verdict), "hang") << d.summary;
  ASSERT_EQ(d.culprits.size(), 1u) << d.summary;
  EXPECT_EQ(d.culprits[0].rank, 1);
  EXPECT_NE(d.culprits[0].why.find("never entered MPI_Barrier #3 on last"), std::string::npos) << d.culprits[0].why;
  for (const std::string& w : loaded.warnings) EXPECT_EQ(w.find("not recorded"), std::string::npos) << w;
  // Every communicator's one message is its stream's first, on both sides,
  // though slots (and the threads' cached streams) were taken again.
  ExpectEveryMessageFirstOfItsStream(dir, 1000);
}

// All but one slot kept: every later communicator takes that one slot
// again, at once, so a thread's cached stream for the slot is the old
// communicator's; the new one's messages still count from 1.
TEST(Mpi, MessagesOnASlotTakenAgainCountFromOne) {
  TempDir dir;
  testing::Started job({"mpirun", "-np", "2", "--oversubscribe", HT_CLI, "run", "--dir", dir.path(), "--job", "job",
                        "--timeout", "1", "--", HT_MPI_PROG, "many-comms", "4150", "4093"},
                       testing::kMpiAsRoot);
  ASSERT_TRUE(job.WaitFor("stuck", 120)) << job.out();
  usleep(1500 * 1000);  // past the watchdog's timeout: one look at the live job can tell a hang
  ExpectEveryMessageFirstOfItsStream(dir, 4000);
  Job loaded = LoadJob({dir.path()});
  Diagnosis d = Diagnose(loaded);
  EXPECT_EQ(VerdictName(d.verdict), "hang") << d.summary;
  ASSERT_EQ(d.culprits.size(), 1u) << d.summary;
  EXPECT_EQ(d.culprits[0].rank, 1);
}

// A Fortran program (`use mpi`) is traced as a C one: Open MPI's Fortran
// bindings call the profiling layer directly, so only the wrappers of the
// Fortran entry points see its calls. Every call the program makes is
// recorded with its communicator and sequence numbers, every request it
// posts is ended by the completion call that retired it (a wildcard
// receive with the source and sequence number its status gave), and the
// ranks agree on the communicators they made.
// Under MPICH (mpirun.mpich) the same program goes through MPICH's Fortran
// bindings, which call the C functions: the MPICH build's C wrappers
// record the same calls.
class FortranMpis : public ::testing::TestWithParam<std::string> {};

TEST_P(FortranMpis, AFortranProgramsCallsAreTracedAsTheCOnes) {
  const bool mpich = GetParam() == "mpich";
  const std::string prog = std::string(HT_OTHER_DIR) + (mpich ? "/families_fortran_mpich" : "/families_fortran");
  if (access(prog.c_str(), X_OK) != 0) GTEST_SKIP() << prog << " was not built (gfortran, mpich)";
  TempDir dir;
  std::vector<std::string> argv = {mpich ? "mpirun.mpich" : "mpirun", "-np", "4"};
  if (!mpich) argv.push_back("--oversubscribe");
  argv.insert(argv.end(), {HT_CLI, "run", "--dir", dir.path(), "--job", "job", "--", prog});
  ProgramResult r = RunProgram(argv, testing::kMpiAsRoot, 60);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto ranks = ReadRanks(dir);
  ASSERT_EQ(ranks.size(), 4u);
  std::map<std::string, uint64_t> split_id;  // by color
  for (const auto& [rank, s] : ranks) {
    std::map<std::string, int> begins;
    bool wildcard_resolved = false;
    int matched_received = 0;  // MPI_Mrecv/Imrecv ENDs with the probe's communicator and the sender
    bool integer_named = false;  // MPI_INTEGER, a Fortran datatype, named as the C int32
    for (const Event& e : s.events) {
      const std::string call = s.CallName(e.rec.call);
      if (e.rec.kind == uint8_t(fmt::EventKind::kBegin)) ++begins[call];
      integer_named |= call == "MPI_Allreduce" && e.rec.dtype == uint8_t(fmt::Dtype::kInt32);
      if ((call == "MPI_Mrecv" || call == "MPI_Imrecv") && e.rec.kind == uint8_t(fmt::EventKind::kEnd)) {
        matched_received += e.rec.comm != fmt::kNoComm && e.rec.peer == (rank + 3) % 4 && e.rec.seq >= 1;
      }
      if (call == "MPI_Irecv" && e.rec.kind == uint8_t(fmt::EventKind::kEnd) && (e.rec.flags & fmt::kRecAnyPeer)) {
        wildcard_resolved = e.rec.peer == (rank + 3) % 4 && e.rec.seq == 1;
      }
    }
    for (const char* call : {"MPI_Init", "MPI_Comm_split", "MPI_Comm_dup", "MPI_Allreduce", "MPI_Bcast",
                             "MPI_Iallreduce", "MPI_Wait", "MPI_Irecv", "MPI_Isend", "MPI_Waitall", "MPI_Waitany",
                             "MPI_Sendrecv", "MPI_Probe", "MPI_Recv", "MPI_Comm_free", "MPI_Barrier", "MPI_Finalize",
                             "MPI_Mprobe", "MPI_Mrecv", "MPI_Imrecv", "MPI_Comm_idup", "MPI_Comm_create_group"}) {
      EXPECT_GT(begins[call], 0) << call << " not recorded on rank " << rank;
    }
    // Each start of a persistent request posts it (MPI_Start, then MPI_Startall).
    EXPECT_EQ(begins["MPI_Send_init"], 2) << "rank " << rank;
    EXPECT_EQ(begins["MPI_Recv_init"], 2) << "rank " << rank;
    EXPECT_EQ(begins["MPI_Isend"], 7) << "rank " << rank;
    EXPECT_EQ(begins["MPI_Waitany"], 2) << "rank " << rank;
    EXPECT_TRUE(wildcard_resolved) << "rank " << rank << ": the wildcard receive's END lacks its source or sequence";
    EXPECT_TRUE(integer_named) << "rank " << rank << ": MPI_INTEGER not named";
    EXPECT_EQ(matched_received, 2) << "rank " << rank << ": a matched receive lacks its communicator or sender";
    for (size_t c = 0; c < s.comms.size(); ++c) {
      if (!s.comm_valid[c] || s.CallName(s.comms[c].entry.creator_call) != "MPI_Comm_split") continue;
      const std::string color = std::to_string(rank % 2);
      if (!split_id.count(color)) split_id[color] = s.comms[c].entry.id;
      EXPECT_EQ(s.comms[c].entry.id, split_id[color]) << "rank " << rank << " disagrees on its split's id";
    }
  }
  EXPECT_EQ(split_id.size(), 2u);
  // MPI_Comm_set_name(dup, 'fortran dup'): the label, without the padding.
  for (const auto& [rank, s] : ranks) {
    bool named = false;
    for (size_t c = 0; c < s.comms.size(); ++c) named |= s.comm_valid[c] && s.CommLabel(uint16_t(c)) == "fortran dup";
    EXPECT_TRUE(named) << "rank " << rank << ": the communicator the program named is not labelled so";
  }
  Job job = LoadJob({dir.path()});
  Diagnosis d = Diagnose(job);
  EXPECT_EQ(d.summary, "every rank exited");
  for (const RankView& v : job.ranks) EXPECT_TRUE(v.pending.empty()) << "rank " << v.rank << " has requests never ended";
}

INSTANTIATE_TEST_SUITE_P(Mpi, FortranMpis, ::testing::Values("openmpi", "mpich"),
                         [](const auto& info) { return info.param; });

// A C program built with MPICH (Debian's mpich: the ABI of Intel MPI, Cray
// MPICH and MVAPICH too), run by mpirun.mpich: the MPICH build of the
// wrappers records it exactly as the Open MPI build records the same
// program under Open MPI.
TEST(Mpi, AProgramBuiltWithMpichIsTracedAsUnderOpenMpi) {
  const std::string prog = std::string(HT_OTHER_DIR) + "/stuck_mpich";
  if (access(prog.c_str(), X_OK) != 0) GTEST_SKIP() << prog << " was not built (mpich)";
  TempDir dir;
  ProgramResult r = RunProgram({"mpirun.mpich", "-np", "4", HT_CLI, "run", "--dir", dir.path(), "--job", "job", "--",
                                prog, "families"},
                               testing::kMpiAsRoot, 60);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.err.find("not an MPI hangtrace was built for"), std::string::npos) << r.err;
  auto ranks = ReadRanks(dir);
  ASSERT_EQ(ranks.size(), 4u);
  CheckCommIdentity(ranks, 4);
  CheckCollectiveSequences(ranks);
  size_t pairs = 0;
  CheckPointToPoint(ranks, &pairs);
  EXPECT_GE(pairs, 4u * 8);
  CheckRequestsRetired(ranks);
  std::set<std::string> labels, calls;
  std::set<uint8_t> dtypes, redops;
  for (const auto& [rank, s] : ranks) {
    for (size_t i = 0; i < s.comms.size(); ++i) {
      if (s.comm_valid[i]) labels.insert(s.CommLabel(uint16_t(i)));
    }
    for (const Event& e : s.events) {
      calls.insert(s.CallName(e.rec.call));
      dtypes.insert(e.rec.dtype);
      redops.insert(e.rec.redop);
    }
  }
  for (const char* l : {"world", "self", "even", "odd", "dup", "created", "grp", "idup"}) EXPECT_TRUE(labels.count(l)) << l;
  for (const char* c : {"MPI_Init_thread", "MPI_Allreduce", "MPI_Bcast", "MPI_Comm_split", "MPI_Iallreduce",
                        "MPI_Waitall", "MPI_Send", "MPI_Recv", "MPI_Irecv", "MPI_Sendrecv", "MPI_Probe",
                        "MPI_Finalize"}) {
    EXPECT_TRUE(calls.count(c)) << c;
  }
  // MPICH's integer handles named as Open MPI's are.
  EXPECT_TRUE(dtypes.count(uint8_t(fmt::Dtype::kInt32))) << "MPI_INT not named";
  EXPECT_TRUE(redops.count(uint8_t(fmt::Redop::kSum))) << "MPI_SUM not named";
}

// A Fortran deadlock through MPI_Wait: every rank waits for a receive from
// its right neighbour, which waits too. Untraced, the ranks' trace said
// nothing after their last MPI_Allreduce ("unknown": outside any traced
// call); traced, it is the cycle.
TEST(Mpi, AFortranDeadlockInMpiWaitIsTheCycle) {
  const std::string prog = std::string(HT_OTHER_DIR) + "/deadlock_fortran";
  if (access(prog.c_str(), X_OK) != 0) GTEST_SKIP() << prog << " was not built (gfortran)";
  TempDir dir;
  testing::Started job({"mpirun", "-np", "4", "--oversubscribe", HT_CLI, "run", "--dir", dir.path(), "--job", "job",
                        "--", prog},
                       testing::kMpiAsRoot);
  ASSERT_TRUE(job.WaitFor("stuck", 60)) << job.out();
  usleep(1000 * 1000);
  Job loaded = LoadJob({dir.path()});
  Diagnosis d = Diagnose(loaded);
  EXPECT_EQ(VerdictName(d.verdict), "deadlock") << d.summary;
  EXPECT_EQ(d.culprits.size(), 4u) << d.summary;
  for (const Culprit& c : d.culprits) {
    EXPECT_NE(c.why.find("MPI_Wait waits for rank " + std::to_string((c.rank + 1) % 4)), std::string::npos) << c.why;
  }
}

// A thread's cached communicator must not outlive it: another thread frees
// "first" and dups "second", which MPI gives the same handle; the first
// thread's next call is on "second".
TEST(Mpi, AHandleMpiGivesOutAgainIsTheNewCommunicator) {
  TempDir dir;
  ProgramResult r = RunProgram({"mpirun", "-np", "2", "--oversubscribe", HT_CLI, "run", "--dir", dir.path(), "--job",
                                "job", "--", HT_MPI_PROG, "recycled-comm"},
                               testing::kMpiAsRoot, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  if (r.out.find("same_handle 1") == std::string::npos) GTEST_SKIP() << "MPI gave a new handle: " << r.out;
  auto ranks = ReadRanks(dir);
  for (const auto& [rank, s] : ranks) {
    std::vector<std::string> labels;
    for (const Event& e : s.events) {
      if (s.CallName(e.rec.call) == "MPI_Allreduce" && e.rec.kind == uint8_t(fmt::EventKind::kBegin)) {
        labels.push_back(s.CommLabel(e.rec.comm));
      }
    }
    EXPECT_EQ(labels, (std::vector<std::string>{"first", "second"})) << "rank " << rank;
  }
}

// None freed: past the table, communicators go unrecorded, and the report
// says so instead of guessing.
TEST(Mpi, ACommunicatorTableFullIsSaid) {
  TempDir dir;
  testing::Started job({"mpirun", "-np", "2", "--oversubscribe", HT_CLI, "run", "--dir", dir.path(), "--job", "job",
                        "--", HT_MPI_PROG, "many-comms", "4200", "keep"},
                       testing::kMpiAsRoot);
  ASSERT_TRUE(job.WaitFor("stuck", 120)) << job.out();
  usleep(1000 * 1000);
  Job loaded = LoadJob({dir.path()});
  Diagnosis d = Diagnose(loaded);
  const std::string report = TextReport(loaded, d);
  EXPECT_NE(report.find("communicator(s) not recorded: the communicator table (4096 entries) was full"),
            std::string::npos) << report;
  // Rank 0's barrier is on an unrecorded communicator: nothing says whom
  // it waits for ("the problem is below MPI" was a confident wrong answer).
  EXPECT_EQ(VerdictName(d.verdict), "unknown") << d.summary;
  EXPECT_NE(d.summary.find("rank 0 is in a communication call on a communicator its trace did not record"),
            std::string::npos) << d.summary;
}

TEST(Mpi, AProgramsOwnSignalHandlersBehaveAsUntraced) {
  // What the program sees of its signal setup, and what its handlers do,
  // is the same traced and untraced: a SIGTERM handler without SA_RESTART,
  // installed before or after MPI_Init, interrupts a blocking read(); the
  // default dispositions read as default; 1000 SIGSEGVs the program handles
  // itself are no crash.
  for (const char* mode : {"query", "term-before", "term-after", "segv-handled"}) {
    TempDir untraced_dir, traced_dir;
    const SignalsRun untraced = RunSignals(mode, false, untraced_dir);
    const SignalsRun traced = RunSignals(mode, true, traced_dir);
    EXPECT_EQ(traced.out, untraced.out) << mode;
    EXPECT_EQ(traced.exit_code, untraced.exit_code) << mode;
    if (std::string(mode) == "query") {
      EXPECT_NE(untraced.out.find("SIGSEGV default"), std::string::npos) << untraced.out;
    }
    if (std::string(mode).rfind("term-", 0) == 0) {
      EXPECT_NE(untraced.out.find("read: Interrupted system call"), std::string::npos) << untraced.out;
    }
    if (std::string(mode) == "segv-handled") {
      EXPECT_NE(traced.out.find("handled 1000 faults"), std::string::npos) << traced.out;
      Job job = LoadJob({traced_dir.path()});
      Diagnosis d = Diagnose(job);
      EXPECT_EQ(d.verdict, Verdict::kNoHang) << "a program that handles its own faults did not crash: " << d.summary;
    }
  }
}

// tests/mpi/blocked_calls.c MODE on two ranks, traced (watchdog 2 s) or
// not: its lines (one per blocked call and rank), sorted, since mpirun
// forwards the ranks' output in any order.
// With `dump_into`, the job runs untraced and `hangtrace dump -p <mpirun>`
// reads it once both ranks say (by a file) their threads are at their calls.
std::vector<std::string> RunBlockedCalls(const std::string& mode, const TempDir* traced,
                                         const TempDir* dump_into = nullptr, int wait_s = 8) {
  std::vector<std::string> argv = {"mpirun", "-np", "2", "--oversubscribe"};
  if (traced) argv.insert(argv.end(), {HT_CLI, "run", "--dir", traced->path(), "--job", "job", "--timeout", "2", "--"});
  argv.insert(argv.end(), {HT_BLOCKED_CALLS, mode});
  TempDir ready;
  auto env = testing::kMpiAsRoot;
  env.emplace_back("BLOCKED_CALLS_READY_DIR", ready.path());
  env.emplace_back("BLOCKED_CALLS_WAIT_S", std::to_string(wait_s));
  testing::Started job(argv, env);
  if (dump_into) {
    auto both_ready = [&] {
      return access((ready.path() + "/ready.0").c_str(), F_OK) == 0 &&
             access((ready.path() + "/ready.1").c_str(), F_OK) == 0;
    };
    for (int i = 0; i < 1200 && !both_ready(); ++i) usleep(100 * 1000);
    EXPECT_TRUE(both_ready()) << "the ranks never said their threads were at their calls";
    usleep(200 * 1000);  // from "about to enter" to in it
    ProgramResult d =
        RunProgram({HT_CLI, "dump", "-p", std::to_string(job.pid()), "-o", dump_into->path(), "--looks", "1"}, {}, 60);
    EXPECT_EQ(d.exit_code, 0) << d.err;
  }
  ProgramResult r;
  r.exit_code = job.Wait(90);
  r.out = job.out();
  EXPECT_EQ(r.exit_code, 0) << r.out;
  std::vector<std::string> lines;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("rank ", 0) == 0) lines.push_back(line);
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

TEST(Mpi, ThreadsBlockedInTimedCallsReturnAsUntracedWhileStacksAreCaptured) {
  // Threads of a rank wait 8 s each in nanosleep, poll, select, epoll_wait,
  // sem_timedwait, sleep, sigtimedwait, semtimedop, a socket read with
  // SO_RCVTIMEO, pthread_cond_timedwait and pause, and two more are busy (one
  // reading 32 MiB at a time in the kernel, one polling with a 1 ms timeout
  // in a loop: neither may see a short read or EINTR), while the watchdog flags
  // the rank's MPI_Barrier after 2 s (in-mpi), or while the rank computes
  // past the timeout and takes its idle capture (computing). A signal
  // handler run on them would cut those calls short with EINTR: every call
  // must return what it returns untraced, after its untraced time.
  for (const char* mode : {"in-mpi", "computing"}) {
    TempDir dir;
    const std::vector<std::string> untraced = RunBlockedCalls(mode, nullptr);
    const std::vector<std::string> traced = RunBlockedCalls(mode, &dir);
    ASSERT_EQ(untraced.size(), 26u) << mode;
    EXPECT_NE(std::find(untraced.begin(), untraced.end(), "rank 0 nanosleep returned 0 errno 0 after 8 s or more"),
              untraced.end());
    EXPECT_NE(std::find(untraced.begin(), untraced.end(), "rank 0 sem_timedwait returned -1 errno ETIMEDOUT after 8 s or more"),
              untraced.end());
    EXPECT_EQ(traced, untraced) << mode;

    // The stacks were taken meanwhile, the blocked threads' read without a
    // signal, and they name the function each waits in.
    auto ranks = ReadRanks(dir);
    ASSERT_EQ(ranks.size(), 2u) << mode;
    for (const auto& [rank, s] : ranks) {
      Symbolizer symbols;
      const auto named = SnapshotStacks(s, &symbols);
      int blocked_read = 0, interrupted = 0;
      for (const StackInfo& st : s.stacks) {
        interrupted += (st.flags & fmt::kStackInterruptedCall) != 0;
        auto it = std::find_if(named.begin(), named.end(), [&](const auto& t) { return t.first == st.tid; });
        if (it == named.end() || st.method != fmt::StackMethod::kBlockedRead) continue;
        for (const Frame& f : it->second) blocked_read += f.func == "blocked_in";
      }
      EXPECT_EQ(blocked_read, 11) << mode << ": rank " << rank << " has " << s.stacks.size() << " stacks";
      EXPECT_EQ(interrupted, 0) << mode << ": rank " << rank;
    }
  }
  // `hangtrace dump` of the untraced job, from outside, while the calls
  // wait: they are read where they wait, not stopped. They wait 20 s: on a
  // loaded machine (the suite beside it) the dump may start seconds after
  // the ranks said they were ready, and found them gone with 8.
  TempDir dumped;
  const std::vector<std::string> untraced = RunBlockedCalls("computing", nullptr, nullptr, 20);
  EXPECT_EQ(RunBlockedCalls("computing", nullptr, &dumped, 20), untraced);
  NodeDump node;
  std::string error;
  const std::vector<std::string> folders = FindNodeDumps(dumped.path());
  ASSERT_EQ(folders.size(), 1u);
  ASSERT_TRUE(ReadNodeDump(folders[0], &node, &error)) << error;
  int read_where_blocked = 0;
  std::string threads;  // what each thread was, said when the count is wrong
  for (const NodeProcess& p : node.processes) {
    for (const NodeThread& t : p.threads) {
      bool blocked_in = false;
      for (const Frame& f : t.frames) blocked_in |= f.func == "blocked_in";
      read_where_blocked += blocked_in && t.method == "blocked";
      threads += "\n  pid " + std::to_string(p.pid) + " tid " + std::to_string(t.tid) + " state " + t.state + " " +
                 t.syscall + ": " + t.method + (blocked_in ? ", in blocked_in" : "") + " " + t.error;
    }
  }
  EXPECT_EQ(read_where_blocked, 22) << "11 blocked threads in each of 2 ranks:" << threads;
}

TEST(Mpi, TwoRunsUnderOneJobIdAreAnalyzedApartNewestFirst) {
  // Reruns and concurrent srun steps share a job id, and so a folder. Their
  // files were read as one job: classes from one run, a mismatch invented
  // from the other. Each run is now analyzed on its own, newest first.
  TempDir dir;
  ProgramResult first = RunMpi(dir, 4, "hang", "1");  // rank 1 skips a bcast; SIGALRM ends it
  EXPECT_NE(first.exit_code, 0);
  {
    // Rank 1 skips an allreduce; killed once every rank is in the hang (a
    // fixed time was too short on a loaded machine: no rank had started).
    testing::Started second({"mpirun", "-np", "4", "--oversubscribe", HT_CLI, "run", "--dir", dir.path(), "--job",
                             "job", "--timeout", "1", "--", HT_MPI_PROG, "stuck"},
                            testing::kMpiAsRoot);
    ASSERT_TRUE(second.WaitFor("stuck", 120)) << second.out();
    usleep(1500 * 1000);  // past the watchdog's timeout: a hang, however the files are read
  }
  ProgramResult r = RunProgram({HT_CLI, "analyze", dir.path() + "/job"}, {}, 60);
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find("these paths hold the files of 2 runs of one job id"), std::string::npos) << r.err;
  const size_t newest = r.out.find("== run "), older = r.out.find("== run ", newest + 1);
  ASSERT_NE(newest, std::string::npos) << r.out;
  ASSERT_NE(older, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the newest"), std::string::npos);
  const std::string newest_report = r.out.substr(newest, older - newest), older_report = r.out.substr(older);
  EXPECT_NE(newest_report.find("HANG: rank 1 never entered MPI_Allreduce"), std::string::npos) << newest_report;
  EXPECT_NE(older_report.find("MPI_Bcast"), std::string::npos) << older_report;
  EXPECT_EQ(r.out.find("MISMATCH"), std::string::npos) << "a mismatch made of two runs:\n" << r.out;
  // One run picked; JSON gives the newest.
  ProgramResult json = RunProgram({HT_CLI, "analyze", dir.path() + "/job", "--format", "json"}, {}, 60);
  EXPECT_EQ(json.exit_code, 3);
  auto j = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << json.out;
  EXPECT_EQ(j["verdict"], "hang");
  EXPECT_EQ(j["culprits"].size(), 1u);
  EXPECT_EQ(j["culprits"][0]["rank"], 1);
}

TEST(Mpi, PoolWorkersOfARankLeaveNoFileAndNoVerdict) {
  // An mpi4py job whose ranks run a multiprocessing pool (spawn): the
  // workers inherit the rank's variables, make no traced call and are ended
  // by SIGTERM. They kept a file each (named at start, and at the SIGTERM),
  // and the job read "ranks 0-1 were ended by SIGTERM".
  if (system("/usr/bin/python3 -c 'import mpi4py' 2> /dev/null") != 0) GTEST_SKIP() << "python3-mpi4py is not installed";
  TempDir dir;
  ProgramResult r = RunProgram({"mpirun", "-np", "2", "--oversubscribe", HT_CLI, "run", "--dir", dir.path(), "--job",
                                "job", "--", "/usr/bin/python3", HT_SOURCE_DIR "/tests/python/pool_job.py"},
                               testing::kMpiAsRoot, 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::ListTraceFiles(dir.path()).size(), 2u) << "one file per rank, none per worker";
  Job job = LoadJob({dir.path()});
  Diagnosis d = Diagnose(job);
  EXPECT_EQ(d.verdict, Verdict::kNoHang) << d.summary;
  EXPECT_EQ(d.summary, "every rank exited");
}

TEST(Mpi, HangShowsOthersInBcastAndRankOneInAllreduce) {
  TempDir dir;
  ProgramResult r = RunMpi(dir, 4, "hang", /*timeout=*/"1");
  EXPECT_NE(r.exit_code, 0);  // the ranks die of SIGALRM
  EXPECT_EQ(r.err.find("the hang did not happen"), std::string::npos) << r.err;
  // The watchdog names the root as the report does: by its world rank.
  EXPECT_NE(r.err.find("in MPI_Bcast #3 on comm 'split' root rank 1 for "), std::string::npos) << r.err;
  auto ranks = ReadRanks(dir);
  ASSERT_EQ(ranks.size(), 4u);
  uint64_t split_id = 0;
  for (const auto& [rank, s] : ranks) {
    const ThreadInfo* main = nullptr;
    for (const ThreadInfo& t : s.threads) {
      if (t.in_call) main = &t;
    }
    ASSERT_NE(main, nullptr) << "rank " << rank << " is in no call";
    const fmt::Record& cur = main->current;
    const CommInfo* comm = s.Comm(cur.comm);
    ASSERT_NE(comm, nullptr);
    EXPECT_TRUE(main->watchdog_flagged) << "rank " << rank;
    if (rank == 1) {
      EXPECT_EQ(s.CallName(cur.call), "MPI_Allreduce");
      EXPECT_EQ(s.CommLabel(cur.comm), "world");
      EXPECT_EQ(cur.seq, 2u);  // world #1 was the MPI_Comm_split (collective over world)
    } else {
      EXPECT_EQ(s.CallName(cur.call), "MPI_Bcast") << "rank " << rank;
      EXPECT_EQ(s.CommLabel(cur.comm), "split");
      EXPECT_EQ(cur.seq, 3u);  // after the split's Allreduce and Barrier
      EXPECT_EQ(cur.peer, 1);  // the root that never came
      if (!split_id) split_id = comm->entry.id;
      EXPECT_EQ(comm->entry.id, split_id);
    }
    // The watchdog's stacks show the program's own function under MPI.
    bool named = false;
    Symbolizer symbols;
    for (const auto& [tid, frames] : SnapshotStacks(s, &symbols)) {
      for (const Frame& f : frames) named |= f.func == "hang";
    }
    EXPECT_TRUE(named) << "rank " << rank << ": no stack names hang()";
  }
  // Rank 0's Irecv was never matched: BEGIN with its request, no END.
  const TraceSnapshot& r0 = ranks.at(0);
  int begins = 0, ends = 0;
  uint64_t handle = 0;
  for (const Event& e : r0.events) {
    if (r0.CallName(e.rec.call) != "MPI_Irecv") continue;
    if (e.rec.kind == uint8_t(fmt::EventKind::kBegin)) {
      ++begins;
      handle = e.rec.handle;
      EXPECT_EQ(e.rec.peer, 2);
      EXPECT_EQ(e.rec.tag, 99);
      EXPECT_EQ(e.rec.seq, 1u);
    }
    if (e.rec.kind == uint8_t(fmt::EventKind::kEnd)) ++ends;
  }
  EXPECT_EQ(begins, 1);
  EXPECT_EQ(ends, 0);
  EXPECT_NE(handle, 0u);

  // And the analyzer, on these real traces, names rank 1 and why.
  Job job = LoadJob({dir.path()});
  Diagnosis d = Diagnose(job);
  EXPECT_EQ(VerdictName(d.verdict), "hang") << d.summary;
  ASSERT_EQ(d.culprits.size(), 1u) << d.summary;
  EXPECT_EQ(d.culprits[0].rank, 1);
  EXPECT_NE(d.culprits[0].why.find("never entered MPI_Bcast #3 on split root rank 1"), std::string::npos) << d.culprits[0].why;
  // The job was ended after its hang: where rank 1 was then.
  EXPECT_NE(d.culprits[0].why.find("; when it ended, in MPI_Allreduce #2 on world"), std::string::npos) << d.culprits[0].why;
  ASSERT_EQ(job.ranks[0].pending.size(), 1u);  // the unmatched Irecv
  EXPECT_EQ(job.names[job.ranks[0].pending[0].name], "MPI_Irecv");
}

TEST(Mpi, StoppedRankIsNamedByItsSilentHeartbeat) {
  TempDir dir;
  pid_t pid = fork();
  if (pid == 0) {
    RunMpi(dir, 4, "sigstop", "120", 40);
    _exit(0);
  }
  // Rank 2's runtime stops beating; the others' go on. Wait past 5 s of it.
  for (int i = 0; i < 100 && testing::ListTraceFiles(dir.path()).size() < 4; ++i) usleep(50000);
  sleep(7);
  Job job = LoadJob({dir.path()});
  Diagnosis d = Diagnose(job);
  // Clean up first: a stopped process never dies by itself.
  for (const RankView& v : job.ranks) {
    if (v.state == RankState::kStopped) kill(v.pid, SIGKILL);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_EQ(job.ranks.size(), 4u);
  EXPECT_EQ(job.ranks[2].state, RankState::kStopped);
  EXPECT_GT(job.ranks[2].silent_s, 5.0);
  EXPECT_EQ(VerdictName(d.verdict), "hang") << d.summary;
  ASSERT_EQ(d.culprits.size(), 1u) << d.summary;
  EXPECT_EQ(d.culprits[0].rank, 2);
  EXPECT_NE(d.culprits[0].why.find("is stopped"), std::string::npos) << d.culprits[0].why;
  EXPECT_NE(d.culprits[0].why.find("never entered MPI_Allreduce"), std::string::npos) << d.culprits[0].why;
}

// A trace folder on a file system with room for one rank (a file's 2.2 MB
// of tables and a 4 MB lane) or three files without lanes, never four: a
// rank that cannot allocate its file leaves a *.no-room marker; a rank whose
// file exists waits for them. (With 9 MB, four ranks that all made their
// files before any made its lane fit, and no rank was left without one.) Before, "CRASH: ranks 1-3 have no trace file
// (never started, or its node is gone)" named three innocent ranks; now the
// verdict is unknown and says why. A private tmpfs needs a mount namespace
// (unshare, as root or with user namespaces): skipped where there is none.
TEST(Mpi, RanksTheStorageHadNoRoomForAreUnknownNeverCulprits) {
  TempDir dir, out;
  const std::string traces = dir.path() + "/traces";
  // The job is ended through its own launcher: a `pkill -f` of the
  // program's name also killed the ranks of other tests running beside it.
  const std::string script =
      "mkdir -p " + traces + " && mount -t tmpfs -o size=7m,mode=700 tmpfs " + traces + " || exit 77\n"
      "timeout 60 mpirun -np 4 --oversubscribe " + HT_CLI + " run --dir " + traces + " --job job -- " +
      HT_MPI_PROG + " stuck >/dev/null 2>" + out.path() + "/job.err &\n"
      "LAUNCHER=$!\n"
      // Until a rank has found no room (ranks reach MPI_Init late on a
      // loaded machine), then a moment for the others to wait.
      "for i in $(seq 300); do ls " + traces + "/job 2>/dev/null | grep -q 'no-room$' && grep -q 'No space' " +
      out.path() + "/job.err && break; sleep 0.1; done\n"
      "sleep 2\n"
      "ls " + traces + "/job > " + out.path() + "/files\n"
      + HT_CLI + " analyze -f json " + traces + "/job > " + out.path() + "/analysis.json\n"
      "echo $? > " + out.path() + "/status\n"
      "kill -TERM $LAUNCHER; wait\n";
  ProgramResult r = RunProgram({"unshare", "--mount", "--propagation", "private", "sh", "-c", script},
                               testing::kMpiAsRoot, 90);
  if (r.exit_code == 77 || (r.exit_code != 0 && r.err.find("unshare failed") != std::string::npos)) {
    GTEST_SKIP() << "no private tmpfs here: " << r.err;
  }
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto slurp = [&](const std::string& name) {
    std::ifstream in(out.path() + "/" + name);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string files = slurp("files");
  size_t markers = 0;
  for (size_t at = 0; (at = files.find(".no-room", at)) != std::string::npos; ++at) ++markers;
  // How many files fit before the lanes claim the rest is a race; at least
  // one rank is always left without a file.
  EXPECT_GE(markers, 1u) << files << slurp("job.err");
  EXPECT_NE(slurp("job.err").find("No space left on device"), std::string::npos) << slurp("job.err");
  EXPECT_EQ(slurp("status"), "1\n") << slurp("analysis.json");
  auto j = nlohmann::json::parse(slurp("analysis.json"));
  EXPECT_EQ(j["verdict"], "unknown") << j["summary"];
  EXPECT_TRUE(j["culprits"].empty()) << j["culprits"];
  // Which ranks got a file and which only a marker, or a file without room
  // for its lanes, is a race between them: the reason is one of the two.
  EXPECT_NE(j["summary"].get<std::string>().find("not traced (no room in the trace folder for "), std::string::npos)
      << j["summary"];
}

// Beyond SLURM (docs/DUMP.md): the site's launcher runs one `hangtrace
// dump` per node into a shared folder, then `analyze` reads it. Open MPI's
// mpirun and MPICH's hydra, one process per node (this machine is one
// node). Then the culprit's file is taken out of the dump, as when its node
// sends nothing: the report is unknown, never "CRASH: rank 1 has no trace
// file" (a crash the dump never saw, and a culprit from silence).
TEST(Mpi, ADumpThroughTheSitesLauncherFindsTheCulpritAndAMissingRankIsUnknown) {
  TempDir dir;
  testing::Started job({"mpirun", "-np", "4", "--oversubscribe", HT_CLI, "run", "--dir", dir.path() + "/traces",
                        "--job", "job", "--timeout", "1", "--", HT_MPI_PROG, "stuck"},
                       testing::kMpiAsRoot);
  ASSERT_TRUE(job.WaitFor("stuck", 60)) << job.out();
  usleep(1500 * 1000);  // the others reach the all-reduce, and wait past the watchdog's timeout
  const std::string dump = std::string(HT_CLI) + " dump --dir " + dir.path() + "/traces --job job --out ";
  ProgramResult ompi = RunProgram({"sh", "-c", "mpirun --map-by ppr:1:node " + dump + dir.path() + "/ompi"},
                                  testing::kMpiAsRoot, 60);
  ProgramResult hydra = RunProgram({"sh", "-c", "mpiexec.hydra -ppn 1 -n 1 " + dump + dir.path() + "/hydra"}, {}, 60);
  ASSERT_EQ(ompi.exit_code, 0) << ompi.err;
  ASSERT_EQ(hydra.exit_code, 0) << hydra.err;
  for (const char* launcher : {"ompi", "hydra"}) {
    ProgramResult r = RunProgram({HT_CLI, "analyze", dir.path() + "/" + launcher}, {}, 60);
    EXPECT_EQ(r.exit_code, 3) << launcher << ": " << r.out << r.err;
    EXPECT_EQ(r.out.rfind("hangtrace: HANG: rank 1 never entered MPI_Allreduce #6 on world", 0), 0u)
        << launcher << ": " << r.out;
  }
  // Rank 1's file out of the dump (its second look, as analyze reads it).
  Job whole = LoadJob({dir.path() + "/ompi/second"});
  ASSERT_EQ(whole.ranks.size(), 4u);
  const std::string file = whole.ranks[1].path;
  ASSERT_FALSE(file.empty());
  ASSERT_EQ(unlink(file.c_str()), 0) << file;
  Job partial = LoadJob({dir.path() + "/ompi/second"});
  Diagnosis d = Diagnose(partial);
  EXPECT_EQ(VerdictName(d.verdict), "unknown") << d.summary;
  EXPECT_TRUE(d.culprits.empty()) << d.summary;
  EXPECT_EQ(d.summary.rfind("rank 1 is missing from the dump (its node sent none", 0), 0u) << d.summary;
  EXPECT_NE(d.summary.find("ranks 0,2-3 wait for it"), std::string::npos) << d.summary;
}

// The seed's own case: a job started under no tool hangs; `dump -p` of its
// launcher finds the ranks (its descendants), reads each rank from its
// environment and its stacks from outside; analyze says what it can from
// stacks alone, and says so.
TEST(Mpi, AJobNobodyTracedIsDumpedByItsLauncherAndDiagnosedFromStacks) {
  TempDir out;
  pid_t launcher = fork();
  if (launcher == 0) {
    testing::StartOwnSession();  // as a job of its own: its fair share of the CPUs
    for (const auto& [k, v] : testing::kMpiAsRoot) setenv(k.c_str(), v.c_str(), 1);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    execlp("mpirun", "mpirun", "-np", "4", "--oversubscribe", HT_MPI_PROG, "sigstop", (char*)nullptr);
    _exit(127);
  }
  // Rank 2 stops itself; the others enter MPI_Allreduce. Wait for the stop.
  std::vector<RankedProcess> ranks;
  bool stopped = false;
  for (int i = 0; i < 200 && !stopped; ++i) {
    usleep(50000);
    ranks = RanksUnder(launcher);
    for (const RankedProcess& r : ranks) {
      ProcStat st;
      stopped |= r.rank == 2 && ReadProcStat(r.pid, &st) && st.state == 'T';
    }
  }
  usleep(300000);  // the others reach the all-reduce
  ProgramResult dump = RunProgram({HT_CLI, "dump", "-p", std::to_string(launcher), "-o", out.path()}, {}, 60);
  ProgramResult text = RunProgram({HT_CLI, "analyze", out.path()}, {}, 60);
  ProgramResult json = RunProgram({HT_CLI, "analyze", "-f", "json", out.path()}, {}, 60);
  for (const RankedProcess& r : ranks) kill(r.pid, SIGKILL);
  kill(launcher, SIGTERM);
  waitpid(launcher, nullptr, 0);

  ASSERT_TRUE(stopped) << "rank 2 never stopped";
  ASSERT_EQ(ranks.size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(ranks[size_t(r)].rank, r);
    EXPECT_EQ(ranks[size_t(r)].world_size, 4);
    EXPECT_EQ(ranks[size_t(r)].rank_from, "OMPI_COMM_WORLD_RANK");
  }
  EXPECT_EQ(dump.exit_code, 0) << dump.err;
  EXPECT_NE(dump.err.find("4 rank process(es) found, 4 untraced"), std::string::npos) << dump.err;
  EXPECT_EQ(text.exit_code, 3) << text.err;
  // The ranks' place is the program's own line (mpi_prog.c's sigstop case),
  // not libmpi's frames below it.
  // (A rank whose main thread the dump could not stop, in the kernel or
  // starved on a loaded machine, is said to be unknown, never placed.)
  const bool rank3_read = text.out.find("rank 3 unknown (its main thread's native stack was not read)") == std::string::npos;
  EXPECT_EQ(text.out.rfind(rank3_read ? "hangtrace: HANG: stacks only: ranks 0-1,3 in MPI_Allreduce at sigstop (mpi_prog.c:"
                                      : "hangtrace: HANG: stacks only: ranks 0-1 in MPI_Allreduce at sigstop (mpi_prog.c:",
                           0),
            0u)
      << text.out;
  EXPECT_NE(text.out.find("rank 2 stopped"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("culprit rank 2"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("no trace, so no communicator or sequence number"), std::string::npos) << text.out;
  auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["basis"], "stacks");
  EXPECT_EQ(j["ranks_from_stacks"], "0-3");
  EXPECT_EQ(j["ranks_with_trace"], "");
  ASSERT_EQ(j["culprits"].size(), 1u);
  EXPECT_EQ(j["culprits"][0]["rank"], 2);
  EXPECT_EQ(j["groups"][0]["user_frame"]["func"], "sigstop") << j["groups"][0].dump();
  EXPECT_EQ(j["groups"][0]["user_frame"]["lang"], "native");
  EXPECT_FALSE(j["groups"][0].contains("python"));
}

TEST(Mpi, CommunicatorsNobodyNamedAreCalledByWhatTheyAre) {
  TempDir dir;
  ProgramResult r = RunMpi(dir, 4, "unnamed");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  Job job = LoadJob({dir.path()});
  std::set<std::string> labels;
  for (const GlobalComm& c : job.comms) labels.insert(c.label);
  // MPI_Comm_split(world, rank % 2): the halves {0,2} and {1,3}; a dup of world.
  auto has = [&](const std::string& tail) {
    for (const std::string& l : labels) {
      if (l.rfind("comm ", 0) == 0 && l.size() > tail.size() && l.compare(l.size() - tail.size(), tail.size(), tail) == 0)
        return true;
    }
    return false;
  };
  std::string all;
  for (const std::string& l : labels) all += l + "; ";
  EXPECT_TRUE(has(" of 2: 0,2")) << all;
  EXPECT_TRUE(has(" of 2: 1,3")) << all;
  EXPECT_TRUE(has(" of 4: 0-3")) << all;
  EXPECT_EQ(labels.count("world"), 1u) << all;
}

// The pids of the ranks of a running job, from their trace files.
std::map<int, pid_t> RankPids(const TempDir& dir, int np) {
  std::map<int, pid_t> out;
  for (int i = 0; i < 200 && int(out.size()) < np; ++i) {
    out.clear();
    for (const std::string& f : testing::ListTraceFiles(dir.path())) {
      std::string err;
      auto s = ReadTraceFile(f, &err, ReadOptions{false, false});
      if (s && s->process.rank_source == uint8_t(fmt::RankSource::kMpi)) out[s->process.rank] = s->process.pid;
    }
    usleep(50000);
  }
  return out;
}

TEST(Mpi, ARankKilledFirstIsTheCulpritAndTheLauncherEndingTheOthersIsSaid) {
  // What the OOM killer or a kill -9 does to one rank of a job: Open MPI
  // then ends the others with SIGTERM. Every process is gone when the job
  // is analyzed; it was reported as a hang below MPI.
  TempDir dir;
  pid_t job = fork();
  if (job == 0) {
    RunMpi(dir, 4, "loop", "120", 60);
    _exit(0);
  }
  auto pids = RankPids(dir, 4);
  ASSERT_EQ(pids.size(), 4u);
  usleep(500000);  // well into the loop
  kill(pids[2], SIGKILL);
  waitpid(job, nullptr, 0);
  Job j = LoadJob({dir.path()});
  Diagnosis d = Diagnose(j);
  EXPECT_EQ(VerdictName(d.verdict), std::string("crash")) << d.summary;
  ASSERT_EQ(d.culprits.size(), 1u) << d.summary;
  EXPECT_EQ(d.culprits[0].rank, 2);
  EXPECT_NE(d.summary.find("rank 2 died first, without an exit record"), std::string::npos) << d.summary;
  EXPECT_NE(d.summary.find("ended the others"), std::string::npos) << d.summary;
  EXPECT_EQ(d.summary.find("below MPI"), std::string::npos) << d.summary;
  // Open MPI sends SIGTERM, then SIGKILL soon after: on a loaded machine a
  // rank may die before its handler has run (with the suite's other jobs
  // on both cores, two of the three did once). One records it at least.
  int termed = 0;
  for (int r : {0, 1, 3}) termed += j.ranks[size_t(r)].term_signal == SIGTERM;
  EXPECT_GE(termed, 1) << "the launcher's SIGTERM is recorded";
  EXPECT_EQ(j.ranks[2].term_signal, 0);
}

TEST(Mpi, ARankThatCrashesInsideACallIsItsCulprit) {
  // It was reported as "below MPI" with no culprit: the others had all
  // entered the call, and the crashed rank was not "in" it any more.
  TempDir dir;
  ProgramResult r = RunMpi(dir, 4, "crash-in-call");
  EXPECT_NE(r.exit_code, 0);
  Job j = LoadJob({dir.path()});
  Diagnosis d = Diagnose(j);
  EXPECT_EQ(VerdictName(d.verdict), std::string("crash")) << d.summary;
  ASSERT_EQ(d.culprits.size(), 1u) << d.summary;
  EXPECT_EQ(d.culprits[0].rank, 1);
  EXPECT_NE(d.culprits[0].why.find("crashed with SIGSEGV"), std::string::npos) << d.culprits[0].why;
  EXPECT_NE(d.culprits[0].why.find("MPI_Allreduce"), std::string::npos) << d.culprits[0].why;
  EXPECT_EQ(d.summary.find("below MPI"), std::string::npos) << d.summary;
}

TEST(Mpi, EveryRankKilledWhileRunningIsACrashNotAHang) {
  TempDir dir;
  pid_t job = fork();
  if (job == 0) {
    RunMpi(dir, 4, "loop", "120", 60);
    _exit(0);
  }
  auto pids = RankPids(dir, 4);
  ASSERT_EQ(pids.size(), 4u);
  usleep(500000);
  for (const auto& [rank, pid] : pids) kill(pid, SIGKILL);
  waitpid(job, nullptr, 0);
  Diagnosis d = Diagnose(LoadJob({dir.path()}));
  EXPECT_EQ(VerdictName(d.verdict), std::string("crash")) << d.summary;
  EXPECT_TRUE(d.culprits.empty()) << d.summary;
  EXPECT_NE(d.summary.find("while the job ran: nothing was hung"), std::string::npos) << d.summary;
}

// One look at a job at work: its ranks sit in an all-reduce for an instant
// at every moment, and one of them is always behind the others. That was
// called a hang naming the rank not yet in the call ("not in any traced
// call for 0.0 s"). None of the waits is longer than the call ever took:
// unknown, with why, and no rank named.
TEST(Mpi, OneLookAtAJobAtWorkNamesNoCulprit) {
  TempDir dir;
  pid_t job = fork();
  if (job == 0) {
    RunMpi(dir, 4, "work", "120", 60, Load::kLinked, {"2000000000"});
    _exit(0);
  }
  auto pids = RankPids(dir, 4);
  ASSERT_EQ(pids.size(), 4u);
  usleep(500000);  // well into the loop: a thousand all-reduces each
  int in_calls = 0;
  for (int look = 0; look < 8; ++look) {
    Diagnosis d = Diagnose(LoadJob({dir.path()}));
    const std::string verdict = VerdictName(d.verdict);
    // (A rank a loaded machine held off its CPU for 2 s, 200 times the
    // longest all-reduce before, would be a hang by the rule: not this.)
    double longest_wait = 0;
    for (const Group& g : d.groups) longest_wait = std::max(longest_wait, g.in_call_s);
    if (longest_wait >= 2) continue;
    EXPECT_TRUE(verdict == "unknown" || verdict == "no-hang") << d.summary;
    EXPECT_TRUE(d.culprits.empty()) << d.summary;
    if (verdict == "unknown" && d.evidence.find("one look at a running job") != std::string::npos) {
      ++in_calls;
      EXPECT_NE(d.evidence.find("10x the longest the same call took before on"), std::string::npos) << d.evidence;
    }
    usleep(100000);
  }
  EXPECT_GT(in_calls, 0) << "no look found a rank in a call";
  for (const auto& [rank, pid] : pids) kill(pid, SIGKILL);
  waitpid(job, nullptr, 0);
}


// limited to `bytes`; "" when this machine does not let us make one.
std::string MemoryCgroup(size_t bytes) {
  const std::string name = "hangtrace-test-" + std::to_string(getpid());
  for (const auto& [root, limit] : {std::pair<std::string, std::string>{"/sys/fs/cgroup/unified", "memory.max"},
                                    {"/sys/fs/cgroup", "memory.max"},
                                    {"/sys/fs/cgroup/memory", "memory.limit_in_bytes"}}) {
    const std::string dir = root + "/" + name;
    if (mkdir(dir.c_str(), 0755) != 0) continue;
    // A cgroup file system makes cgroup.procs and the limit file itself; a
    // plain folder (a tmpfs at /sys/fs/cgroup) would take any file.
    if (access((dir + "/cgroup.procs").c_str(), W_OK) != 0 || access((dir + "/" + limit).c_str(), W_OK) != 0) {
      rmdir(dir.c_str());
      continue;
    }
    FILE* f = fopen((dir + "/" + limit).c_str(), "w");
    if (f && fprintf(f, "%zu\n", bytes) > 0 && fclose(f) == 0) return dir;
    if (f) fclose(f);
    rmdir(dir.c_str());
  }
  return "";
}

TEST(Mpi, AnOomKilledRankIsTheCulprit) {
  const std::string cg = MemoryCgroup(64 << 20);
  if (cg.empty()) GTEST_SKIP() << "no memory cgroup can be made here";
  // The kernel's OOM killer ends rank 1 (SIGKILL, no exit record); Open
  // MPI then ends the others.
  TempDir dir;
  ProgramResult r = RunMpi(dir, 3, "oom", "120", 60, Load::kLinked, {cg + "/cgroup.procs"});
  rmdir(cg.c_str());
  EXPECT_NE(r.exit_code, 0);
  Job j = LoadJob({dir.path()});
  Diagnosis d = Diagnose(j);
  EXPECT_EQ(VerdictName(d.verdict), std::string("crash")) << d.summary << r.err;
  ASSERT_EQ(d.culprits.size(), 1u) << d.summary;
  EXPECT_EQ(d.culprits[0].rank, 1);
  EXPECT_NE(d.culprits[0].why.find("OOM killer"), std::string::npos) << d.culprits[0].why;
}

TEST(Mpi, AnalyzeTwiceSaysSlowNotHungForAJobThatMoves) {
  TempDir dir;
  // A job busy in 1-byte all-reduces for a few seconds; read it live twice.
  pid_t pid = fork();
  if (pid == 0) {
    RunMpi(dir, 2, "loop", "120", 60);
    _exit(0);
  }
  // Wait until both ranks have files and are inside their loop.
  for (int i = 0; i < 100 && testing::ListTraceFiles(dir.path()).size() < 2; ++i) usleep(50000);
  usleep(500000);
  ProgramResult r = RunProgram({HT_CLI, "analyze", "--format", "json", "--interval", "0.3", dir.path()}, {});
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["progressing"], "0-1") << r.out;
  EXPECT_EQ(j["verdict"], "no-hang") << r.out;
}

TEST(Mpi, ThreadsForkAndExecKeepWorkingAndTraced) {
  TempDir dir;
  ProgramResult r = RunMpi(dir, 4, "threads");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto ranks = ReadRanks(dir);
  ASSERT_EQ(ranks.size(), 4u);
  for (const auto& [rank, s] : ranks) {
    std::set<uint32_t> tids;
    size_t sendrecvs = 0;
    for (const Event& e : s.events) {
      tids.insert(e.rec.tid);
      if (s.CallName(e.rec.call) == "MPI_Sendrecv" && e.rec.kind == uint8_t(fmt::EventKind::kEnd)) {
        ++sendrecvs;
        EXPECT_EQ(s.CommLabel(e.rec.comm), "thread");
        EXPECT_EQ(e.rec.seq, e.rec.aux) << "send and receive counts on a ring advance together";
      }
    }
    EXPECT_GE(tids.size(), 2u) << "rank " << rank << ": both threads recorded";
    EXPECT_EQ(sendrecvs, 20u);
    EXPECT_EQ(s.process.mpi_thread_level, MPI_THREAD_MULTIPLE);
  }
  CheckCollectiveSequences(ranks);
  // Rank 0's fork child exec'ed /bin/true at once. Both images are ranks by
  // their environment, so each had its file from the start; neither made a
  // traced call: /bin/true removed the child's when it took its name, and its
  // own at exit 0. (ExecMarksThePreviousImage covers an image with records.)
  int execed = 0, true_exited = 0, forked = 0;
  for (const std::string& f : testing::ListTraceFiles(dir.path())) {
    std::string err;
    auto s = ReadTraceFile(f, &err);
    ASSERT_TRUE(s) << err;
    if (s->process.forked && fmt::ProcState(s->process.state) == fmt::ProcState::kExeced) ++execed;
    forked += s->process.forked;
    if (std::string(s->process.exe).find("true") != std::string::npos &&
        fmt::ProcState(s->process.state) == fmt::ProcState::kExited) {
      ++true_exited;
    }
  }
  EXPECT_EQ(execed, 0);
  EXPECT_EQ(forked, 0);
  EXPECT_EQ(true_exited, 0);
  EXPECT_EQ(testing::ListTraceFiles(dir.path()).size(), 4u) << "one file per rank, nothing else";
}

// --- the catalogue of MPI bugs (tests/mpi/bugs) --------------------------------
//
// Small programs written to break the rules, each with its truth in a
// TRUTH line: ranks, verdict, culprits, the call each rank sits in. Each
// runs traced under real Open MPI until it hangs (or ends); the live files
// are analyzed and the report compared with the truth. docs/accuracy.md
// keeps the score.

struct BugTruth {
  std::string name;
  int np = 2;
  std::string verdict;
  std::set<int> culprits;
  std::map<int, std::string> ops;  // rank -> call name, or "exited" / "compute"
  std::string words;               // in the verdict or a culprit's reason
};

// Families the analyzer does not get right yet (issue "any MPI program"):
// run, reported, and skipped instead of failed until they are.
const std::map<std::string, std::string> kNotYet = {
};

BugTruth ReadTruth(const std::string& name) {
  BugTruth t;
  t.name = name;
  std::ifstream in(std::string(HT_BUGS_SRC) + "/" + name + ".c");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = text.find("TRUTH ");
  EXPECT_NE(at, std::string::npos) << name << " states no truth";
  if (at == std::string::npos) return t;
  std::istringstream line(text.substr(at + 6, text.find('\n', at) - at - 6));
  for (std::string field; line >> field;) {
    const size_t eq = field.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = field.substr(0, eq), value = field.substr(eq + 1);
    std::istringstream items(value);
    std::string item;
    if (key == "np") t.np = std::stoi(value);
    if (key == "verdict") t.verdict = value;
    if (key == "words") {  // '~' for a space
      t.words = value;
      std::replace(t.words.begin(), t.words.end(), '~', ' ');
    }
    if (key == "culprits") {
      while (std::getline(items, item, ',')) {
        if (!item.empty()) t.culprits.insert(std::stoi(item));
      }
    }
    if (key == "ops") {
      while (std::getline(items, item, ',')) {
        const size_t colon = item.find(':');
        if (colon != std::string::npos) t.ops[std::stoi(item.substr(0, colon))] = item.substr(colon + 1);
      }
    }
  }
  return t;
}

std::vector<std::string> BugNames() {
  std::vector<std::string> names;
  std::istringstream in(HT_BUGS);
  for (std::string n; std::getline(in, n, ',');) names.push_back(n);
  return names;
}

class MpiBugs : public ::testing::TestWithParam<std::string> {};

TEST_P(MpiBugs, TheReportMatchesWhatReallyHappened) {
  const BugTruth truth = ReadTruth(GetParam());
  TempDir dir;
  pid_t job = fork();
  if (job == 0) {
    testing::StartOwnSession();
    for (const auto& [k, v] : testing::kMpiAsRoot) setenv(k.c_str(), v.c_str(), 1);
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    const std::string prog = std::string(HT_BUGS_DIR) + "/" + truth.name, np = std::to_string(truth.np);
    execlp("mpirun", "mpirun", "-np", np.c_str(), "--oversubscribe", HT_CLI, "run", "--dir", dir.path().c_str(),
           "--job", "bug", "--timeout", "0", prog.c_str(), (char*)nullptr);
    _exit(127);
  }
  // Until it ends, or every rank has its file and has had time to get stuck.
  bool ended = false;
  int status = 0;
  for (int i = 0; i < 300 && !ended; ++i) {
    usleep(20000);
    ended = waitpid(job, &status, WNOHANG) == job;
    if (int(testing::ListTraceFiles(dir.path()).size()) >= truth.np && i > 0) {
      // Past MPI_Init first: on a loaded machine it takes seconds, and
      // ranks all in it at both looks read as stuck below MPI.
      auto in_init = [&] {
        const Job now = LoadJob({dir.path()});
        return std::any_of(now.ranks.begin(), now.ranks.end(), [&](const RankView& v) {
          return v.state == RankState::kInCall && now.names[v.current.name] == "MPI_Init";
        });
      };
      for (int k = 0; k < 300 && !ended && in_init(); ++k) {  // up to 30 s
        usleep(100000);
        ended = waitpid(job, &status, WNOHANG) == job;
      }
      for (int k = 0; k < 75 && !ended; ++k) {  // 1.5 s
        usleep(20000);
        ended = waitpid(job, &status, WNOHANG) == job;
      }
      break;
    }
  }
  // Two snapshots, as `analyze --interval` takes of a live job: a rank
  // that waits (by blocking or by polling) must not look as if it moved.
  Job earlier = LoadJob({dir.path()});
  usleep(500000);
  Job j = LoadJob({dir.path()});
  Diagnosis d = Diagnose(j, ended ? nullptr : &earlier);
  kill(-job, SIGKILL);
  if (!ended) waitpid(job, &status, 0);

  // What the report says, against the truth.
  std::vector<std::string> wrong;
  if (VerdictName(d.verdict) != truth.verdict) wrong.push_back(std::string("verdict ") + VerdictName(d.verdict));
  std::set<int> culprits;
  std::string reasons = d.summary;
  for (const Culprit& c : d.culprits) {
    culprits.insert(c.rank);
    reasons += " | " + c.why;
  }
  if (culprits != truth.culprits) {
    std::string got;
    for (int c : culprits) got += std::to_string(c) + " ";
    wrong.push_back("culprits " + got);
  }
  for (const auto& [rank, op] : truth.ops) {
    if (size_t(rank) >= j.ranks.size()) {
      wrong.push_back("rank " + std::to_string(rank) + " missing");
      continue;
    }
    const RankView& v = j.ranks[size_t(rank)];
    const std::string got = v.state == RankState::kInCall ? j.names[v.current.name] : RankStateName(v.state);
    if (got != op) wrong.push_back("rank " + std::to_string(rank) + " in " + got + ", not " + op);
  }
  if (!truth.words.empty() && reasons.find(truth.words) == std::string::npos) wrong.push_back("words lack " + truth.words);
  std::string all;
  for (const std::string& w : wrong) all += "\n  " + w;
  printf("[ bug ] %-20s %s\n", truth.name.c_str(), wrong.empty() ? "right" : ("WRONG:" + all).c_str());
  if (auto known = kNotYet.find(truth.name); known != kNotYet.end() && !wrong.empty()) {
    GTEST_SKIP() << "not yet right (" << known->second << "):" << all << "\n" << TextReport(j, d);
  }
  EXPECT_TRUE(wrong.empty()) << truth.name << ":" << all << "\n" << TextReport(j, d);
  if (kNotYet.count(truth.name)) ADD_FAILURE() << truth.name << " is right now: take it off kNotYet";
}

INSTANTIATE_TEST_SUITE_P(Catalogue, MpiBugs, ::testing::ValuesIn(BugNames()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace hangtrace
