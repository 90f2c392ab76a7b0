// The NCCL/CUDA wrappers on the FAKE libraries of tests/fakes (no GPU here):
// tests/gpu/gpu_prog.cc, built against the real CUDA 13 / NCCL 2.28
// headers, runs under `hangtrace run` (alone, or under mpirun for NCCL);
// then its trace files are read and analyzed.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <string>

#include "merger/diagnose.h"
#include "merger/model.h"
#include "merger/trace_reader.h"
#include "tests/test_util.h"

namespace hangtrace {
namespace {

using testing::ProgramResult;
using testing::RunProgram;
using testing::TempDir;


ProgramResult RunGpu(const TempDir& dir, const std::vector<std::string>& args, double limit_s,
                     std::vector<std::pair<std::string, std::string>> env = {}) {
  std::vector<std::string> argv = {HT_CLI, "run", "--dir", dir.path(), "--job", "job", "--"};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProgram(argv, env, limit_s);
}

ProgramResult RunNccl(const TempDir& dir, const std::string& fault, int rank, double limit_s,
                      std::vector<std::pair<std::string, std::string>> env = {}) {
  for (const auto& e : testing::kMpiAsRoot) env.push_back(e);
  ProgramResult r = RunProgram({"mpirun", "-np", "4", "--oversubscribe", HT_CLI, "run", "--dir", dir.path(), "--job",
                                "job", "--", HT_GPU_PROG, "nccl", fault, std::to_string(rank)},
                               env, limit_s);
  RunProgram({"sh", "-c", "rm -f /dev/shm/hangtrace-test-fakenccl-*"}, {}, 10);
  return r;
}

// The same with a fault that hangs the job at step 3: ended (SIGTERM to
// mpirun and its ranks, then SIGKILL) a moment after every rank reached the
// step, however long a loaded machine took to get there (a fixed 6 s once
// ended it still inside MPI_Init).
void RunNcclUntilHung(const TempDir& dir, const std::string& fault, int rank,
                      std::vector<std::pair<std::string, std::string>> env = {}) {
  for (const auto& e : testing::kMpiAsRoot) env.push_back(e);
  {
    testing::Started job({"mpirun", "-np", "4", "--oversubscribe", HT_CLI, "run", "--dir", dir.path(), "--job", "job",
                          "--", HT_GPU_PROG, "nccl", fault, std::to_string(rank)},
                         env);
    for (int r = 0; r < 4; ++r) EXPECT_TRUE(job.WaitFor("step 3 rank " + std::to_string(r), 120)) << job.out();
    usleep(1000 * 1000);  // into the step's calls
    const pid_t group = job.pid();
    kill(-group, SIGTERM);
    job.Wait(2);
    kill(-group, SIGKILL);  // what the launcher left
  }
  RunProgram({"sh", "-c", "rm -f /dev/shm/hangtrace-test-fakenccl-*"}, {}, 10);
}

TraceSnapshot OnlyFile(const TempDir& dir) {
  auto files = testing::ListTraceFiles(dir.path());
  EXPECT_EQ(files.size(), 1u);
  std::string err;
  auto s = files.empty() ? std::nullopt : ReadTraceFile(files[0], &err);
  EXPECT_TRUE(s) << err;
  return s ? *s : TraceSnapshot{};
}

// The kernel names of a file's launches.
std::set<std::string> KernelNames(const TraceSnapshot& s) {
  std::set<std::string> out;
  for (const Event& e : s.events) {
    if (e.rec.kind == uint8_t(fmt::EventKind::kBegin)) out.insert(s.KernelName(e.rec));
  }
  return out;
}

// name -> number of BEGIN records.
std::map<std::string, int> Begins(const TraceSnapshot& s) {
  std::map<std::string, int> out;
  for (const Event& e : s.events) {
    if (e.rec.kind == uint8_t(fmt::EventKind::kBegin)) ++out[s.CallName(e.rec.call)];
  }
  return out;
}

nlohmann::json Analyze(const TempDir& dir) {
  ProgramResult r = RunProgram({HT_CLI, "analyze", "--format", "json", dir.path() + "/job"}, {}, 60);
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_EQ(r.exit_code, j.is_object() && j["verdict"] == "no-hang" ? 0 : 3) << "the status tells the verdict; " << r.err;
  return j;
}

TEST(Gpu, EveryLaunchPathIsTracedOnceWithItsStreamVariant) {
  TempDir dir;
  ProgramResult r = RunGpu(dir, {HT_GPU_PROG, "launches"}, 30);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  TraceSnapshot s = OnlyFile(dir);
  auto n = Begins(s);
  // 5 runtime launches on the legacy API, 1 through its _ptsz variant; the
  // runtime's own driver calls inside them are not recorded again.
  EXPECT_EQ(n["cudaLaunchKernel"], 4);
  EXPECT_EQ(n["cudaLaunchKernel_ptsz"], 1);
  // The driver: one direct call, one through each cuGetProcAddress pointer.
  EXPECT_EQ(n["cuLaunchKernel"], 2);
  EXPECT_EQ(n["cuLaunchKernel_ptsz"], 1);
  EXPECT_EQ(n["cudaStreamSynchronize"], 1);
  EXPECT_EQ(n["cudaDeviceSynchronize"], 1);
  for (const Event& e : s.events) {
    const fmt::Record& x = e.rec;
    std::string name = s.CallName(x.call);
    if (x.kind == uint8_t(fmt::EventKind::kBegin) && name.find("_ptsz") != std::string::npos) {
      EXPECT_TRUE(x.flags & fmt::kRecPtsz) << name;
    }
    if (x.kind == uint8_t(fmt::EventKind::kBegin) && name == "cudaLaunchKernel" && x.handle != 0) {
      EXPECT_EQ(x.count, 2u);   // blocks
      EXPECT_EQ(x.tag, 128);    // threads per block
    }
  }
  std::set<std::string> kernels = KernelNames(s);
  EXPECT_TRUE(kernels.count("k_quick"));
  EXPECT_TRUE(kernels.count("drv_kernel"));
  EXPECT_TRUE(kernels.count("proc_kernel"));
  // Every launch got an event, and every event fired.
  EXPECT_EQ(testing::CountKind(s, fmt::EventKind::kDevicePending), 8u);
  EXPECT_EQ(testing::CountKind(s, fmt::EventKind::kComplete), 8u);
  EXPECT_TRUE(s.header.features & fmt::kFeatDeviceEvents);
}

TEST(Gpu, DeviceEventsOffRecordsNoEvents) {
  TempDir dir;
  ProgramResult r = RunGpu(dir, {HT_GPU_PROG, "launches"}, 30, {{"HANGTRACE_DEVICE_EVENTS", "off"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  TraceSnapshot s = OnlyFile(dir);
  EXPECT_EQ(testing::CountKind(s, fmt::EventKind::kDevicePending), 0u);
  EXPECT_EQ(Begins(s)["cudaLaunchKernel"], 4);
}

TEST(Gpu, AKernelThatNeverFinishesIsWhereTheRankIs) {
  TempDir dir;
  // As torchrun starts it: the rank comes from RANK.
  ProgramResult r = RunGpu(dir, {HT_GPU_PROG, "hang-kernel"}, 3, {{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_EQ(r.term_signal, SIGKILL) << "it should hang";
  Job job = LoadJob({dir.path()});
  ASSERT_EQ(job.ranks.size(), 1u);
  const RankView& v = job.ranks[0];
  ASSERT_EQ(v.state, RankState::kInCall);
  EXPECT_TRUE(v.current.on_device);
  ASSERT_GE(v.current.kernel, 0);
  EXPECT_EQ(job.names[size_t(v.current.kernel)], "k_forever");
  ASSERT_TRUE(v.host_call.valid);
  EXPECT_EQ(job.names[v.host_call.name], "cudaStreamSynchronize");
  EXPECT_EQ(v.device_pending, 1u);  // k_quick finished, k_forever did not
}

TEST(Gpu, NcclLoadedRtldLocalIsStillTraced) {
  TempDir dir;
  ProgramResult r = RunGpu(dir, {HT_GPU_LOCAL_PROG, "rtld-local"}, 30);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  TraceSnapshot s = OnlyFile(dir);
  EXPECT_EQ(Begins(s)["ncclAllReduce"], 1);
  EXPECT_EQ(s.process.rank_source, uint8_t(fmt::RankSource::kNccl));
}

TEST(Gpu, NcclAndCudaDlopenedFromPythonAreTraced) {
  // What `import torch` does: the libraries arrive by dlopen(RTLD_LOCAL)
  // after start-up, and their functions are reached through dlsym (ctypes).
  TempDir dir;
  ProgramResult r = RunGpu(dir, {"/usr/bin/python3", HT_SOURCE_DIR "/tests/python/nccl_ctypes.py"}, 30,
                           {{"LD_LIBRARY_PATH", HT_FAKES_DIR}});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  TraceSnapshot s = OnlyFile(dir);
  auto n = Begins(s);
  EXPECT_EQ(n["ncclCommInitRank"], 1);
  EXPECT_EQ(n["ncclAllReduce"], 1);
  EXPECT_EQ(n["cudaStreamSynchronize"], 1);
  // Its device completion is tracked (the PENDING is written by the caller;
  // the poller's COMPLETE may come after the program exits).
  EXPECT_EQ(testing::CountKind(s, fmt::EventKind::kDevicePending, "ncclAllReduce"), 1u);
}

TEST(Gpu, ATorchCallAndTheNcclCallItIssuesAreBothRecorded) {
  // The Python hook's torch call is the thread's current call without the
  // wrappers' re-entrancy guard: the NCCL call made inside it, on the same
  // thread (as ProcessGroupNCCL makes it), is recorded too, nested in it.
  TempDir dir;
  ProgramResult r = RunGpu(dir, {"/usr/bin/python3", HT_SOURCE_DIR "/tests/python/nccl_ctypes.py", "framework"}, 30,
                           {{"LD_LIBRARY_PATH", HT_FAKES_DIR}});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  TraceSnapshot s = OnlyFile(dir);
  std::vector<std::string> order;
  for (const Event& e : s.events) {
    const std::string call = s.CallName(e.rec.call);
    if (call != "dist.all_reduce" && call != "ncclAllReduce") continue;
    if (e.rec.kind == uint8_t(fmt::EventKind::kBegin)) order.push_back("begin " + call);
    if (e.rec.kind == uint8_t(fmt::EventKind::kEnd)) order.push_back("end " + call);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"begin dist.all_reduce", "begin ncclAllReduce", "end ncclAllReduce",
                                             "end dist.all_reduce"}));
  for (const Event& e : s.events) {
    if (s.CallName(e.rec.call) == "dist.all_reduce") {
      EXPECT_EQ(e.rec.seq, 1u);
      EXPECT_EQ(s.CommLabel(e.rec.comm), "default_pg");
    }
  }
}

TEST(Gpu, NcclCommunicatorsGroupsAndCompletion) {
  TempDir dir;
  ProgramResult r = RunNccl(dir, "none", -1, 60);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::map<uint64_t, std::set<int>> holders;  // comm id -> ranks
  for (const std::string& f : testing::ListTraceFiles(dir.path())) {
    std::string err;
    auto s = ReadTraceFile(f, &err);
    ASSERT_TRUE(s) << err;
    for (size_t i = 0; i < s->comms.size(); ++i) {
      const CommInfo& c = s->comms[i];
      if (!s->comm_valid[i] || c.entry.kind != uint8_t(fmt::CommKind::kNccl)) continue;
      holders[c.entry.id].insert(s->process.rank);
      if (c.entry.size == 4) {
        EXPECT_EQ(s->CommLabel(uint16_t(i)), "ncclworld");
        EXPECT_EQ(c.entry.my_index, s->process.rank);
      } else {
        EXPECT_EQ(c.entry.size, 2);
        EXPECT_EQ(c.entry.my_index, s->process.rank % 2);
      }
    }
    auto n = Begins(*s);
    EXPECT_EQ(n["ncclAllReduce"], 5);
    EXPECT_EQ(n["ncclBroadcast"], 5);
    EXPECT_EQ(n["ncclSend"], 5);
    // A group's operations carry its id; the device tracks each once.
    std::map<uint32_t, int> group_ops;
    for (const Event& e : s->events) {
      if (e.rec.kind == uint8_t(fmt::EventKind::kBegin) && (e.rec.flags & fmt::kRecInGroup)) ++group_ops[e.rec.aux];
    }
    EXPECT_EQ(group_ops.size(), 5u);
    for (const auto& [id, ops] : group_ops) EXPECT_EQ(ops, 2) << "group " << id;
    // all-reduce, send, recv, broadcast per step
    EXPECT_EQ(testing::CountKind(*s, fmt::EventKind::kDevicePending), 5u * 4);
    EXPECT_EQ(testing::CountKind(*s, fmt::EventKind::kComplete), 5u * 4);
  }
  ASSERT_EQ(holders.size(), 3u);  // world and two pairs
  for (const auto& [id, ranks] : holders) EXPECT_TRUE(ranks.size() == 4 || ranks.size() == 2);
  EXPECT_EQ(Analyze(dir)["verdict"], "no-hang");
}

// The group of ranks in `op` in the JSON report, or null.
nlohmann::json GroupIn(const nlohmann::json& j, const std::string& api) {
  for (const auto& g : j["groups"]) {
    if (g["api"] == api) return g;
  }
  return nullptr;
}

TEST(Gpu, ARankThatNeverEnqueuesTheCollectiveIsTheCulprit) {
  TempDir dir;
  RunNcclUntilHung(dir, "skip", 2);
  nlohmann::json j = Analyze(dir);
  EXPECT_EQ(j["verdict"], "hang");
  ASSERT_EQ(j["culprits"].size(), 1u) << j.dump(2);
  EXPECT_EQ(j["culprits"][0]["rank"], 2);
  nlohmann::json g = GroupIn(j, "ncclAllReduce");
  ASSERT_FALSE(g.is_null()) << j.dump(2);
  EXPECT_EQ(g["ranks"], "0-1,3");
  EXPECT_EQ(g["comm"], "ncclworld");
  EXPECT_EQ(g["on_device"], true);  // the hosts wait in cudaStreamSynchronize
}

TEST(Gpu, BlockingModePinsTheHungCollectiveOnTheHost) {
  TempDir dir;
  RunNcclUntilHung(dir, "skip", 2, {{"HANGTRACE_BLOCKING", "coll"}});
  nlohmann::json j = Analyze(dir);
  ASSERT_EQ(j["culprits"].size(), 1u) << j.dump(2);
  EXPECT_EQ(j["culprits"][0]["rank"], 2);
  nlohmann::json g = GroupIn(j, "ncclAllReduce");
  ASSERT_FALSE(g.is_null()) << j.dump(2);
  EXPECT_EQ(g["ranks"], "0-1,3");
  EXPECT_FALSE(g.contains("on_device"));  // the host thread itself is still inside it
}

TEST(Gpu, AKernelThatNeverFinishesBeforeACollectiveNamesItsRank) {
  TempDir dir;
  RunNcclUntilHung(dir, "kernel", 2);
  nlohmann::json j = Analyze(dir);
  EXPECT_EQ(j["verdict"], "hang");
  ASSERT_EQ(j["culprits"].size(), 1u) << j.dump(2);
  EXPECT_EQ(j["culprits"][0]["rank"], 2);
  EXPECT_NE(j["culprits"][0]["why"].get<std::string>().find("k_forever"), std::string::npos);
}

TEST(Gpu, ARankCallingADifferentCollectiveIsAMismatch) {
  TempDir dir;
  RunNcclUntilHung(dir, "mismatch", 2);
  nlohmann::json j = Analyze(dir);
  EXPECT_EQ(j["verdict"], "mismatch");
  ASSERT_EQ(j["culprits"].size(), 1u) << j.dump(2);
  EXPECT_EQ(j["culprits"][0]["rank"], 2);
  ASSERT_FALSE(j["mismatches"].empty());
  EXPECT_EQ(j["mismatches"][0]["comm"], "ncclworld");
}

#ifdef HT_HIP_PROG
TEST(Gpu, HipLaunchesAndTheSptVariant) {
  TempDir dir;
  ProgramResult r = RunGpu(dir, {HT_HIP_PROG}, 30);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  TraceSnapshot s = OnlyFile(dir);
  auto n = Begins(s);
  EXPECT_EQ(n["hipLaunchKernel"], 1);
  EXPECT_EQ(n["hipLaunchKernel_spt"], 1);  // reached through hipGetProcAddress
  EXPECT_EQ(n["hipModuleLaunchKernel"], 1);
  EXPECT_EQ(n["hipStreamSynchronize"], 1);
  std::set<std::string> kernels = KernelNames(s);
  EXPECT_TRUE(kernels.count("hip_quick"));
  EXPECT_TRUE(kernels.count("module_kernel"));
  EXPECT_EQ(testing::CountKind(s, fmt::EventKind::kDevicePending), 3u);
  EXPECT_EQ(testing::CountKind(s, fmt::EventKind::kComplete), 3u);
}
#endif

}  // namespace
}  // namespace hangtrace
