// The bundled trainer: real training that matches a 1-rank run, and every
// fault of its catalogue ending as its truth file says, checked through the
// analyzer on the real traces (the fast part of the accuracy matrix).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "merger/diagnose.h"
#include "tests/test_util.h"

namespace hangtrace {
namespace {

using testing::ProgramResult;
using testing::RunProgram;
using testing::TempDir;

const auto& kMpiEnv = testing::kMpiAsRoot;

std::vector<double> Losses(const std::string& out) {
  std::vector<double> l;
  std::regex re("lm loss: ([-+0-9.eE]+)");
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it) l.push_back(std::stod((*it)[1]));
  return l;
}

TEST(Trainer, ABadFaultIsAClearErrorNotACrash) {
  for (const char* bad : {"stop@rank=x", "stop@rank=1,step=-2", "nosuch@rank=1", "crash", "crash@rank=1,when=2"}) {
    ProgramResult r = RunProgram({"mpirun", "-np", "1", HT_TRAINER, "--fault", bad}, kMpiEnv, 60);
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_NE(r.err.find("hangtrace-trainer: "), std::string::npos) << bad << ": " << r.err;
    EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << bad << ": " << r.err;
  }
}

TEST(Trainer, ParallelLossMatchesOneRankStepByStep) {
  ProgramResult one = RunProgram({"mpirun", "-np", "1", HT_TRAINER, "--steps", "6", "--micro-batches", "8"}, kMpiEnv, 60);
  ProgramResult par = RunProgram({"mpirun", "-np", "8", "--oversubscribe", HT_TRAINER, "--tp", "2", "--pp", "2", "--dp", "2",
                                  "--steps", "6", "--micro-batches", "4"},
                                 kMpiEnv, 60);
  ASSERT_EQ(one.exit_code, 0) << one.err;
  ASSERT_EQ(par.exit_code, 0) << par.err;
  std::vector<double> a = Losses(one.out), b = Losses(par.out);
  ASSERT_EQ(a.size(), 6u) << one.out;
  ASSERT_EQ(b.size(), 6u) << par.out;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i] / a[i], 1.0, 1e-4) << "step " << i + 1;
  EXPECT_NE(par.out.find("TFLOPs:"), std::string::npos);
  EXPECT_NE(par.out.find("samples per second:"), std::string::npos);
}

TEST(Trainer, LossFalls) {
  ProgramResult r = RunProgram({"mpirun", "-np", "1", HT_TRAINER, "--steps", "20", "--micro-batches", "8"}, kMpiEnv, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<double> l = Losses(r.out);
  ASSERT_EQ(l.size(), 20u);
  EXPECT_LT((l[17] + l[18] + l[19]) / 3, 0.8 * (l[0] + l[1] + l[2]) / 3);
}

TEST(Trainer, SkippedRangesKeepTheDataOrder) {
  // Steps 2-3 skipped: step 5's batch is the same as without skipping, so a
  // run that skips and one that does not see the same data at step 5; with
  // fewer updates their losses differ, but step 1's is identical.
  ProgramResult skip = RunProgram({"mpirun", "-np", "1", HT_TRAINER, "--steps", "5", "--train-range-to-skip", "1", "2"}, kMpiEnv, 60);
  ProgramResult all = RunProgram({"mpirun", "-np", "1", HT_TRAINER, "--steps", "5"}, kMpiEnv, 60);
  ASSERT_EQ(skip.exit_code, 0) << skip.err;
  std::vector<double> a = Losses(skip.out), b = Losses(all.out);
  ASSERT_EQ(a.size(), 3u) << skip.out;
  EXPECT_NE(skip.out.find("iteration      2/     5 | skipped"), std::string::npos) << skip.out;
  EXPECT_DOUBLE_EQ(a[0], b[0]);
}

TEST(Trainer, CheckpointResumesWhereItStopped) {
  TempDir dir;
  std::string ckpt = dir.path() + "/ckpt";
  ProgramResult first = RunProgram({"mpirun", "-np", "2", "--oversubscribe", HT_TRAINER, "--pp", "2", "--steps", "3", "--save", ckpt}, kMpiEnv, 60);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ProgramResult resumed = RunProgram({"mpirun", "-np", "2", "--oversubscribe", HT_TRAINER, "--pp", "2", "--steps", "5", "--load", ckpt}, kMpiEnv, 60);
  ProgramResult straight = RunProgram({"mpirun", "-np", "2", "--oversubscribe", HT_TRAINER, "--pp", "2", "--steps", "5"}, kMpiEnv, 60);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  std::vector<double> a = Losses(resumed.out), b = Losses(straight.out);
  ASSERT_EQ(a.size(), 2u) << resumed.out;  // steps 4 and 5
  ASSERT_EQ(b.size(), 5u);
  EXPECT_NEAR(a[0], b[3], 1e-6);
  EXPECT_NEAR(a[1], b[4], 1e-6);
}

struct FaultCase {
  std::string fault;
  int tp, pp, dp;
  std::string backend = "mpi";  // nccl: on the FAKE GPU libraries of tests/fakes
};
void PrintTo(const FaultCase& c, std::ostream* os) {
  *os << c.fault << " " << c.tp << "x" << c.pp << "x" << c.dp << " " << c.backend;
}

class TrainerFaults : public ::testing::TestWithParam<FaultCase> {};

TEST_P(TrainerFaults, EndsAsTheTruthSaysAndTheAnalyzerAgrees) {
  const FaultCase& c = GetParam();
  TempDir dir;
  const int np = c.tp * c.pp * c.dp;
  std::string truth_path = dir.path() + "/truth.json";
  std::vector<std::string> argv = {"mpirun", "-np", std::to_string(np), "--oversubscribe"};
#ifdef HT_FAKES_DIR
  if (c.backend == "nccl") argv.insert(argv.end(), {"-x", std::string("LD_LIBRARY_PATH=") + HT_FAKES_DIR});
#endif
  argv.insert(argv.end(), {HT_CLI, "run", "--dir", dir.path(), "--job", "job", "--timeout", "2", "--", HT_TRAINER,
                           "--backend", c.backend, "--tp", std::to_string(c.tp), "--pp", std::to_string(c.pp), "--dp",
                           std::to_string(c.dp), "--layers", std::to_string(2 * c.pp), "--steps", "6", "--fault",
                           c.fault, "--truth", truth_path});
  ProgramResult r = RunProgram(argv, kMpiEnv, 8);
  if (c.backend == "nccl") RunProgram({"sh", "-c", "rm -f /dev/shm/hangtrace-test-fakenccl-*"}, {}, 10);
  std::ifstream in(truth_path);
  ASSERT_TRUE(in) << r.out << r.err;
  nlohmann::json truth = nlohmann::json::parse(in);
  const std::string verdict = truth["verdict"];
  // How the job ends: a straggler finishes; a hang is ended by our timeout.
  if (verdict == "no-hang") {
    EXPECT_EQ(r.exit_code, 0) << r.err;
  } else if (verdict == "hang" || verdict == "deadlock") {
    EXPECT_EQ(r.term_signal, SIGKILL) << "the job should hang\n" << r.out << r.err;
  } else if (verdict == "crash") {
    EXPECT_NE(r.exit_code, 0) << r.err;
  }

  // The watchdog names a broadcast's root by its world rank, as the report
  // does: pp groups are {t + tp*(p + pp*d)}, so the root is not rank 1 of pp.
  if (c.backend == "mpi" && c.fault.rfind("seed-hang@rank=3,", 0) == 0 && c.tp == 2 && c.pp == 2 && c.dp == 2) {
    EXPECT_NE(r.err.find("on comm 'pp1' root rank 3 for "), std::string::npos) << r.err;
  }
  Job job = LoadJob({dir.path()});
  Diagnosis d = Diagnose(job);
  EXPECT_EQ(VerdictName(d.verdict), verdict) << d.summary;
  std::set<int32_t> want(truth["culprits"].begin(), truth["culprits"].end()), got;
  for (const Culprit& k : d.culprits) got.insert(k.rank);
  EXPECT_EQ(got, want) << d.summary;
  if (!truth.contains("stuck_complete")) {
    for (const auto& s : truth["stuck"]) {
      RankSet ranks;
      ASSERT_TRUE(RankSet::Parse(s["ranks"].get<std::string>(), &ranks));
      for (int32_t rank : ranks.Ranks()) {
        const RankView& v = job.ranks[size_t(rank)];
        ASSERT_EQ(v.state, RankState::kInCall) << "rank " << rank;
        EXPECT_EQ(fmt::OpName(v.current.op), s["op"].get<std::string>()) << "rank " << rank;
        EXPECT_EQ(job.comms[size_t(v.current.comm)].label, s["comm"].get<std::string>()) << "rank " << rank;
      }
    }
  }
}

std::string FaultName(const ::testing::TestParamInfo<FaultCase>& i) {
  std::string n = (i.param.backend == "mpi" ? "" : i.param.backend + "_") + i.param.fault + "_" + std::to_string(i.param.tp) + "x" + std::to_string(i.param.pp) + "x" + std::to_string(i.param.dp);
  for (char& ch : n) {
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return n;
}

INSTANTIATE_TEST_SUITE_P(
    Catalogue, TrainerFaults,
    ::testing::Values(FaultCase{"seed-hang@rank=3,step=2", 2, 2, 2}, FaultCase{"stop@rank=5,step=2", 2, 2, 2},
                      FaultCase{"crash@rank=2,step=2", 2, 2, 2}, FaultCase{"swap@rank=6,step=2", 2, 2, 2}, FaultCase{"swap@rank=3,step=2", 2, 2, 2},
                      FaultCase{"count@rank=1,step=2", 2, 2, 2}, FaultCase{"dtype@rank=4,step=2", 2, 2, 2},
                      FaultCase{"root@rank=0,step=2", 2, 2, 2}, FaultCase{"p2p-deadlock@rank=0,step=2", 2, 2, 2},
                      FaultCase{"straggler@rank=1,factor=3", 2, 2, 2}, FaultCase{"seed-hang@rank=5,step=3", 2, 3, 2},
                      FaultCase{"stop@rank=8,step=1", 2, 3, 2}, FaultCase{"crash@rank=3,step=2", 2, 3, 2},
                      FaultCase{"p2p-deadlock@rank=2,step=1", 2, 3, 2}, FaultCase{"straggler@rank=7,factor=3", 2, 3, 2}),
    FaultName);

#ifdef HT_FAKES_DIR
// The NCCL backend, on the FAKE GPU libraries (no GPU here): the same model
// over NCCL communicators, staged through "device" buffers. p2p-deadlock is
// left out: the fake NCCL's sends do not wait for their receives.
TEST(TrainerNccl, OnTheFakesTheLossEqualsTheMpiBackends) {
  ProgramResult mpi = RunProgram({"mpirun", "-np", "8", "--oversubscribe", HT_TRAINER, "--tp", "2", "--pp", "2", "--dp",
                                  "2", "--steps", "5"},
                                 kMpiEnv, 60);
  ProgramResult nccl = RunProgram({"mpirun", "-np", "8", "--oversubscribe", "-x",
                                   std::string("LD_LIBRARY_PATH=") + HT_FAKES_DIR, HT_TRAINER, "--backend", "nccl",
                                   "--tp", "2", "--pp", "2", "--dp", "2", "--steps", "5"},
                                  kMpiEnv, 60);
  RunProgram({"sh", "-c", "rm -f /dev/shm/hangtrace-test-fakenccl-*"}, {}, 10);
  ASSERT_EQ(mpi.exit_code, 0) << mpi.err;
  ASSERT_EQ(nccl.exit_code, 0) << nccl.err;
  EXPECT_NE(nccl.out.find("backend nccl"), std::string::npos);
  std::vector<double> a = Losses(mpi.out), b = Losses(nccl.out);
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(b.size(), 5u);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(b[i] / a[i], 1.0, 1e-5) << "step " << i + 1;
}

TEST(TrainerNccl, WithoutAGpuItSaysSoAndWithOneItTrains) {
  // The real CUDA runtime: with no NVIDIA device node there is no GPU to
  // find, and the trainer must say so; with one it must train.
  const bool gpu = access("/dev/nvidiactl", F_OK) == 0 || access("/dev/nvidia0", F_OK) == 0;
  ProgramResult r = RunProgram({"mpirun", "-np", "1", HT_TRAINER, "--backend", "nccl", "--steps", "1"}, kMpiEnv, 60);
  if (gpu) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
  } else {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--backend nccl needs an NVIDIA GPU"), std::string::npos) << r.err;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Nccl, TrainerFaults,
    ::testing::Values(FaultCase{"seed-hang@rank=3,step=2", 2, 2, 2, "nccl"}, FaultCase{"stop@rank=5,step=2", 2, 2, 2, "nccl"},
                      FaultCase{"crash@rank=2,step=2", 2, 2, 2, "nccl"}, FaultCase{"count@rank=1,step=2", 2, 2, 2, "nccl"},
                      FaultCase{"dtype@rank=4,step=2", 2, 2, 2, "nccl"}, FaultCase{"root@rank=0,step=2", 2, 2, 2, "nccl"},
                      FaultCase{"swap@rank=3,step=2", 2, 2, 2, "nccl"},
                      FaultCase{"straggler@rank=1,factor=3", 2, 2, 2, "nccl"}),
    FaultName);
#endif

}  // namespace
}  // namespace hangtrace
