// The analyzer against ground truth: every fault of the trainer's catalogue,
// simulated on several topologies, positions and steps, then diagnosed.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "merger/diagnose.h"
#include "merger/node_dump.h"
#include "merger/pictures.h"
#include "merger/report.h"
#include "merger/simulate.h"
#include "merger/trace_compact.h"
#include "merger/trace_writer.h"
#include "tests/test_util.h"

namespace hangtrace {
namespace {

using testing::TempDir;

struct Case {
  std::string fault;
  int tp, pp, dp;
  int rank, step;
};

std::string Name(const Case& c) {
  std::string n = c.fault + "_" + std::to_string(c.tp) + "x" + std::to_string(c.pp) + "x" + std::to_string(c.dp) +
                  "_rank" + std::to_string(c.rank) + "_step" + std::to_string(c.step);
  for (char& ch : n) {
    if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return n;
}

// How gtest (and so ctest's test list) shows a case: its name, not its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << Name(c); }

// Ranks where each fault can strike (the catalogue's EligibleRanks, as the
// trainer and the simulator decide it): first, middle and last.
std::vector<Case> Cases() {
  std::vector<Case> out;
  const int topos[][3] = {{2, 2, 2}, {2, 3, 2}, {4, 2, 2}, {2, 2, 8}};
  for (const trainer::FaultInfo& info : trainer::kFaults) {
    std::string kind = info.name;
    for (const auto& t : topos) {
      const int tp = t[0], pp = t[1], dp = t[2];
      const std::vector<int> eligible = trainer::EligibleRanks(info.kind, trainer::Shape{tp, pp, dp});
      std::vector<int> picks = {eligible.front(), eligible[eligible.size() / 2], eligible.back()};
      std::sort(picks.begin(), picks.end());
      picks.erase(std::unique(picks.begin(), picks.end()), picks.end());
      for (int r : picks) {
        for (int step : {0, 2}) out.push_back({kind, tp, pp, dp, r, step});
      }
    }
  }
  return out;
}

// rank -> (op, comm label) of every in-call rank.
std::map<int32_t, std::pair<std::string, std::string>> StuckOf(const Job& job, const Diagnosis& d) {
  std::map<int32_t, std::pair<std::string, std::string>> out;
  for (const Group& g : d.groups) {
    if (g.state != RankState::kInCall) continue;
    for (int32_t r : g.ranks.Ranks()) {
      out[r] = {fmt::OpName(g.call.op), g.call.comm >= 0 ? job.comms[size_t(g.call.comm)].label : ""};
    }
  }
  return out;
}

class Golden : public ::testing::TestWithParam<Case> {};

TEST_P(Golden, DiagnosisMatchesTheTruth) {
  const Case& c = GetParam();
  TempDir dir;
  SimConfig cfg;
  cfg.tp = c.tp;
  cfg.pp = c.pp;
  cfg.dp = c.dp;
  cfg.steps = 3;
  cfg.out = dir.path();
  cfg.threads = 1;
  trainer::Fault f;
  std::string err;
  ASSERT_TRUE(trainer::ParseFault(c.fault + "@rank=" + std::to_string(c.rank) + ",step=" + std::to_string(c.step), &f, &err)) << err;
  cfg.faults.push_back(f);
  SimResult sim;
  ASSERT_TRUE(Simulate(cfg, &sim, &err)) << err;
  const nlohmann::json& truth = sim.truth;

  LoadOptions lo;
  lo.threads = 2;  // exercise the merge of two loaders
  Job job = LoadJob({dir.path()}, lo);
  EXPECT_TRUE(job.warnings.empty()) << job.warnings.front();
  Diagnosis d = Diagnose(job);

  EXPECT_EQ(VerdictName(d.verdict), truth["verdict"].get<std::string>()) << d.summary;
  std::set<int32_t> want(truth["culprits"].begin(), truth["culprits"].end()), got;
  for (const Culprit& k : d.culprits) got.insert(k.rank);
  EXPECT_EQ(got, want) << d.summary;
  // Who is stuck where: exactly the truth's classes.
  std::map<int32_t, std::pair<std::string, std::string>> expected;
  for (const auto& s : truth["stuck"]) {
    RankSet ranks;
    ASSERT_TRUE(RankSet::Parse(s["ranks"].get<std::string>(), &ranks));
    for (int32_t r : ranks.Ranks()) expected[r] = {s["op"].get<std::string>(), s["comm"].get<std::string>()};
  }
  EXPECT_EQ(StuckOf(job, d), expected);
  // The verdict and the culprits lead the text report.
  std::string text = TextReport(job, d);
  std::string verdict = VerdictName(d.verdict);
  for (char& ch : verdict) ch = char(toupper(ch));
  EXPECT_EQ(text.rfind("hangtrace: " + verdict + ": ", 0), 0u) << text;
  // The verdict's line is a sentence a tired person reads once: short.
  EXPECT_LE(text.find('\n'), 175u) << text.substr(0, text.find('\n'));
  if (!d.culprits.empty()) {
    std::string first_lines;
    size_t pos = 0;
    for (int i = 0; i < 5 && pos != std::string::npos; ++i) pos = text.find('\n', pos + 1);
    first_lines = text.substr(0, pos);
    EXPECT_NE(first_lines.find("culprit rank " + std::to_string(d.culprits[0].rank)), std::string::npos) << text;
  }
}

INSTANTIATE_TEST_SUITE_P(Faults, Golden, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return Name(i.param); });

TEST(Analyze, AHostileFolderNeitherCrashesNorHangsTheTools) {
  // A job's folder with, beside its real files: a link loop and a link to
  // itself named *.htrace, a fifo, a device, a folder named like a trace
  // file, an empty file, a link out of the folder. Each gets one warning;
  // the rest is analyzed. (A symlink loop aborted analyze with an uncaught
  // std::filesystem_error.)
  TempDir dir;
  SimConfig cfg;
  cfg.out = dir.path();
  std::string err;
  trainer::Fault f;
  ASSERT_TRUE(trainer::ParseFault("seed-hang@rank=3,step=2", &f, &err));
  cfg.faults.push_back(f);
  SimResult sim;
  ASSERT_TRUE(Simulate(cfg, &sim, &err)) << err;
  const std::string j = dir.path() + "/sim/";
  ASSERT_EQ(symlink((j + "loop-b.htrace").c_str(), (j + "loop-a.htrace").c_str()), 0);
  ASSERT_EQ(symlink((j + "loop-a.htrace").c_str(), (j + "loop-b.htrace").c_str()), 0);
  ASSERT_EQ(symlink((j + "self.htrace").c_str(), (j + "self.htrace").c_str()), 0);
  ASSERT_EQ(mkfifo((j + "fifo.htrace").c_str(), 0600), 0);
  ASSERT_EQ(symlink("/dev/zero", (j + "zero.htrace").c_str()), 0);
  ASSERT_EQ(mkdir((j + "folder.htrace").c_str(), 0700), 0);
  std::ofstream(j + "empty.htrace");
  for (const std::vector<std::string>& cmd : {std::vector<std::string>{HT_CLI, "analyze", dir.path()},
                                              std::vector<std::string>{HT_CLI, "inspect", dir.path()},
                                              std::vector<std::string>{HT_CLI, "analyze", j + "fifo.htrace"}}) {
    testing::ProgramResult r = testing::RunProgram(cmd, {}, 30);
    EXPECT_NE(r.term_signal, SIGKILL) << cmd[1] << " hung";
    EXPECT_NE(r.exit_code, 134) << cmd[1] << " aborted: " << r.err;
    EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
  }
  Job job = LoadJob({dir.path()});
  EXPECT_EQ(job.world_size, 8);
  Diagnosis d = Diagnose(job);
  EXPECT_EQ(VerdictName(d.verdict), std::string("hang")) << d.summary;
  std::string warnings;
  for (const std::string& w : job.warnings) warnings += w + "\n";
  for (const char* want : {"loop-a.htrace: a symbolic link", "self.htrace: a symbolic link", "fifo.htrace: a fifo",
                           "zero.htrace: a symbolic link", "empty.htrace: empty file"}) {
    EXPECT_NE(warnings.find(want), std::string::npos) << want << " in:\n" << warnings;
  }
}

TEST(Analyze, MemoryFollowsTheRecordsNotTheSequenceNumbers) {
  // A job that had done 2^40 collectives on every communicator before what
  // its rings hold: the signature tables hold what was read, no more (they
  // were indexed by sequence number: 24 bytes per collective ever run).
  TempDir dir;
  SimConfig cfg;
  cfg.out = dir.path();
  cfg.seq_base = 1ull << 40;
  trainer::Fault f;
  std::string err;
  ASSERT_TRUE(trainer::ParseFault("seed-hang@rank=3,step=2", &f, &err)) << err;
  cfg.faults.push_back(f);
  SimResult sim;
  ASSERT_TRUE(Simulate(cfg, &sim, &err)) << err;
  Job job = LoadJob({dir.path()});
  Diagnosis d = Diagnose(job);
  EXPECT_EQ(VerdictName(d.verdict), std::string("hang")) << d.summary;
  ASSERT_EQ(d.culprits.size(), 1u);
  EXPECT_EQ(d.culprits[0].rank, 3);
  EXPECT_NE(d.culprits[0].why.find("MPI_Bcast #" + std::to_string((1ull << 40) + 3) + " on pp1"), std::string::npos)
      << d.culprits[0].why;
  size_t held = 0;
  for (const Job::SigTable& t : job.sig_tables) {
    for (const SigWindow& w : t) held += w.Held();
  }
  EXPECT_LT(held, 4096u * 4 * job.comms.size()) << "entries held for " << job.records << " records";
}

TEST(Analyze, AFileClaimingAHugeWorldIsSkippedNotAllocated) {
  TempDir dir;
  SimConfig cfg;
  cfg.out = dir.path();
  SimResult sim;
  std::string err;
  ASSERT_TRUE(Simulate(cfg, &sim, &err)) << err;
  // Rank 0 now claims a world of 10^8 ranks.
  const std::string f = dir.path() + "/sim/node0000.10000.htrace";
  std::string bytes = testing::ReadFileText(f);
  fmt::FileHeader h;
  memcpy(&h, bytes.data(), sizeof(h));
  const size_t at = h.sections[fmt::kSecProcess].offset + offsetof(fmt::ProcessInfo, world_size);
  int32_t huge = 100000000;
  memcpy(&bytes[at], &huge, sizeof(huge));
  std::ofstream(f, std::ios::binary | std::ios::trunc) << bytes;
  Job job = LoadJob({dir.path()});
  EXPECT_EQ(job.world_size, 8);
  bool warned = false;
  for (const std::string& w : job.warnings) warned |= w.find("beyond the") != std::string::npos;
  EXPECT_TRUE(warned);
}

Job SimulateAndLoad(const TempDir& dir, const std::string& fault, int tp = 2, int pp = 2, int dp = 2) {
  SimConfig cfg;
  cfg.tp = tp;
  cfg.pp = pp;
  cfg.dp = dp;
  cfg.out = dir.path();
  if (!fault.empty()) {
    trainer::Fault f;
    std::string err;
    EXPECT_TRUE(trainer::ParseFault(fault, &f, &err)) << err;
    cfg.faults.push_back(f);
  }
  SimResult sim;
  std::string err;
  EXPECT_TRUE(Simulate(cfg, &sim, &err)) << err;
  return LoadJob({dir.path()});
}

TEST(Analyze, JsonCarriesTheContractKeys) {
  TempDir dir;
  Job job = SimulateAndLoad(dir, "seed-hang@rank=3");
  Diagnosis d = Diagnose(job);
  nlohmann::json j = nlohmann::json::parse(JsonReport(job, d).dump());
  for (const char* k : {"schema", "world_size", "ranks_with_trace", "ranks_missing", "verdict", "summary", "culprits",
                        "groups", "mismatches", "cycles", "cycle_ranks", "basis", "ranks_from_stacks",
                        "ranks_with_trace_list", "ranks_missing_list", "stacks", "notes", "warnings"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["schema"], "hangtrace.analysis/1");
  EXPECT_EQ(j["world_size"], 8);
  EXPECT_EQ(j["ranks_with_trace"], "0-7");
  EXPECT_EQ(j["ranks_missing"], "");
  EXPECT_EQ(j["verdict"], "hang");
  ASSERT_EQ(j["culprits"].size(), 1u);
  for (const char* k : {"rank", "host", "pid", "why"}) EXPECT_TRUE(j["culprits"][0].contains(k)) << k;
  EXPECT_EQ(j["culprits"][0]["rank"], 3);
  ASSERT_GE(j["groups"].size(), 2u);
  for (const auto& g : j["groups"]) {
    for (const char* k : {"ranks", "count", "state", "api", "op", "comm", "seq", "in_call_s", "waiting_for"}) {
      EXPECT_TRUE(g.contains(k)) << k;
    }
  }
  // Biggest first: the world all-reduce class of 7, then the broadcast.
  EXPECT_EQ(j["groups"][0]["ranks"], "0,2-7");
  EXPECT_EQ(j["groups"][0]["op"], "allreduce");
  EXPECT_EQ(j["groups"][0]["comm"], "world");
  EXPECT_EQ(j["groups"][0]["waiting_for"], "1");
  EXPECT_EQ(j["groups"][1]["op"], "bcast");
  EXPECT_EQ(j["groups"][1]["comm"], "pp1");
  EXPECT_EQ(j["groups"][1]["waiting_for"], "3");
}

TEST(Analyze, MismatchNamesFieldValuesAndOddRank) {
  TempDir dir;
  Job job = SimulateAndLoad(dir, "count@rank=1,step=1");
  Diagnosis d = Diagnose(job);
  ASSERT_EQ(d.mismatches.size(), 1u);
  const Mismatch& m = d.mismatches[0];
  EXPECT_EQ(m.field, "count");
  EXPECT_EQ(job.comms[size_t(m.comm)].label, "tp0");
  EXPECT_EQ(m.odd.ToString(), "1");
  ASSERT_EQ(m.values.size(), 2u);
  EXPECT_EQ(m.values[0].first, "4096");
  EXPECT_EQ(m.values[1].first, "2048");
}

TEST(Analyze, MissingRankIsNamedAndBlamed) {
  TempDir dir;
  SimulateAndLoad(dir, "stop@rank=5");
  // Rank 5's node is gone: no file.
  for (const std::string& f : testing::ListTraceFiles(dir.path())) {
    if (f.find(".10005.") != std::string::npos) std::remove(f.c_str());
  }
  Job job = LoadJob({dir.path()});
  Diagnosis d = Diagnose(job);
  EXPECT_EQ(d.missing.ToString(), "5");
  EXPECT_EQ(d.with_trace.ToString(), "0-4,6-7");
  ASSERT_EQ(d.culprits.size(), 1u);
  EXPECT_EQ(d.culprits[0].rank, 5);
  EXPECT_NE(d.culprits[0].why.find("no trace file"), std::string::npos) << d.culprits[0].why;
  EXPECT_EQ(VerdictName(d.verdict), "crash");
}

// The same silence, but the rank left a marker: the storage had no room for
// its file. It was started and is untraced: nothing convicts it, and the
// verdict says what it cannot know instead of "crash".
TEST(Analyze, ARankTheStorageHadNoRoomForIsUnknownNotACulprit) {
  TempDir dir;
  SimulateAndLoad(dir, "stop@rank=5");
  std::string folder;
  for (const std::string& f : testing::ListTraceFiles(dir.path())) {
    if (f.find(".10005.") == std::string::npos) continue;
    folder = f.substr(0, f.rfind('/'));
    std::remove(f.c_str());
  }
  ASSERT_FALSE(folder.empty());
  std::ofstream(folder + "/node1.10005.rank5of8.no-room").close();
  Job job = LoadJob({dir.path()});
  Diagnosis d = Diagnose(job);
  EXPECT_EQ(d.missing.ToString(), "5");
  EXPECT_EQ(VerdictName(d.verdict), "unknown") << d.summary;
  EXPECT_TRUE(d.culprits.empty()) << d.culprits[0].why;
  EXPECT_EQ(d.summary.rfind("rank 5 is not traced (no room in the trace folder for a trace file), and ranks ", 0), 0u)
      << d.summary;
  EXPECT_EQ(job.ranks[5].host, "node1");
  EXPECT_EQ(job.ranks[5].pid, 10005);
  bool warned = false;
  for (const std::string& w : job.warnings) warned |= w.find("found no room for a trace file") != std::string::npos;
  EXPECT_TRUE(warned);
}

TEST(Reader, NoRoomMarkersAreParsedFromTheRight) {
  NoRoomMarker m;
  ASSERT_TRUE(ParseNoRoomMarker("/d/job/gpu-7.cluster.example.4242.rank3of8.no-room", &m));
  EXPECT_EQ(m.host, "gpu-7.cluster.example");
  EXPECT_EQ(m.pid, 4242);
  EXPECT_EQ(m.rank, 3);
  EXPECT_EQ(m.world_size, 8);
  ASSERT_TRUE(ParseNoRoomMarker("n1.7.rank0.no-room", &m));
  EXPECT_EQ(m.world_size, -1);
  for (const char* bad : {"n1.7.rank8of8.no-room", "n1.x.rank0.no-room", "7.rank0.no-room", "n1.7.rank.no-room",
                          "n1.7.rank0of8.htrace", "n1.0.rank0.no-room"}) {
    EXPECT_FALSE(ParseNoRoomMarker(bad, &m)) << bad;
  }
}

TEST(Analyze, ANodeLostBesideTheRealCulpritIsUnseenNotBlamed) {
  TempDir dir;
  SimulateAndLoad(dir, "seed-hang@rank=3,step=2");
  // The node of ranks 6 and 7 is gone after the hang: no files. Rank 3's
  // skipped broadcast explains the hang; 6 and 7 are not seen, not guilty.
  for (const std::string& f : testing::ListTraceFiles(dir.path())) {
    if (f.find(".10006.") != std::string::npos || f.find(".10007.") != std::string::npos) std::remove(f.c_str());
  }
  Job job = LoadJob({dir.path()});
  Diagnosis d = Diagnose(job);
  EXPECT_EQ(d.missing.ToString(), "6-7");
  ASSERT_EQ(d.culprits.size(), 1u) << d.summary;
  EXPECT_EQ(d.culprits[0].rank, 3);
  EXPECT_EQ(d.summary.rfind("rank 3 never entered MPI_Bcast", 0), 0u) << d.summary;
  std::string notes;
  for (const std::string& n : d.notes) notes += n + "\n";
  EXPECT_NE(notes.find("ranks 6-7 have no trace file (never started, or their node is gone): not seen; ranks "),
            std::string::npos) << notes;
}

TEST(Analyze, DamagedFilesAreNamedAndTheRestIsAnalyzed) {
  TempDir dir;
  SimulateAndLoad(dir, "seed-hang@rank=3");
  std::vector<std::string> files = testing::ListTraceFiles(dir.path());
  ASSERT_EQ(files.size(), 8u);
  // One foreign file, one cut in its header, one cut in its ring.
  std::ofstream(dir.path() + "/sim/notes.htrace") << "these are not the traces you are looking for\n";
  ASSERT_EQ(truncate(files[0].c_str(), 1000), 0);   // rank 0
  std::ifstream in(files[5], std::ios::binary | std::ios::ate);
  ASSERT_EQ(truncate(files[5].c_str(), off_t(in.tellg()) - 100), 0);  // rank 5: last records lost
  Job job = LoadJob({dir.path()});
  ASSERT_GE(job.warnings.size(), 3u);
  std::string all;
  for (const std::string& w : job.warnings) all += w + "\n";
  EXPECT_NE(all.find("notes.htrace: not a hangtrace trace file"), std::string::npos) << all;
  EXPECT_NE(all.find("truncated: 1000 bytes"), std::string::npos) << all;
  // Rank 5's file, cut in its ring, is named with what was lost, and the
  // rank is still analyzed from what remains.
  bool rank5_named = false;
  for (const std::string& w : job.warnings) {
    rank5_named |= w.rfind(files[5], 0) == 0 && w.find("truncated") != std::string::npos;
  }
  EXPECT_TRUE(rank5_named) << all;
  EXPECT_EQ(job.ranks[5].path, files[5]);
  EXPECT_EQ(job.ranks[5].state, RankState::kInCall);
  Diagnosis d = Diagnose(job);
  EXPECT_EQ(d.missing.ToString(), "0");  // its file is unusable
  std::set<int32_t> culprits;
  for (const Culprit& c : d.culprits) culprits.insert(c.rank);
  EXPECT_TRUE(culprits.count(3)) << d.summary;  // still found from the rest
  EXPECT_EQ(VerdictName(d.verdict), "hang") << d.summary;
}

TEST(Analyze, StackTreeMergesRanksAndWritesDot) {
  TempDir dir;
  Job job = SimulateAndLoad(dir, "seed-hang@rank=3");
  ASSERT_TRUE(HasStacks(job));
  StackNode root = MergeStacks(job);
  EXPECT_EQ(root.ranks.ToString(), "0-7");
  std::string text = StackTreeText(root);
  EXPECT_NE(text.find("MPI_Bcast  [1]"), std::string::npos) << text;
  EXPECT_NE(text.find("MPI_Allreduce  [0,2-7]"), std::string::npos) << text;
  std::string dot = StackTreeDot(job, Diagnose(job), root);
  EXPECT_EQ(dot.rfind("digraph stacks {", 0), 0u);
  EXPECT_NE(dot.find("MPI_Bcast\\n[1] (1)"), std::string::npos) << dot;
  // The branch that holds the culprit (rank 3, in the all-reduce with 0,2-7) is red.
  EXPECT_NE(dot.find("MPI_Allreduce\\n[0,2-7] (7)\", color=red"), std::string::npos) << dot;
}

// A DOT text rendered by Graphviz: it parses, and draws.
void ExpectGraphvizDraws(const std::string& dot, const TempDir& dir) {
  if (system("command -v dot > /dev/null 2>&1") != 0) GTEST_SKIP() << "Graphviz is not installed (setup installs it)";
  const std::string in = dir.path() + "/g.dot", out = dir.path() + "/g.svg";
  std::ofstream(in) << dot;
  ASSERT_EQ(system(("dot -Tsvg -o " + out + " " + in + " 2> " + dir.path() + "/dot.err").c_str()), 0)
      << testing::ReadFileText(dir.path() + "/dot.err") << dot;
  EXPECT_NE(testing::ReadFileText(out).find("<svg"), std::string::npos);
}

TEST(Pictures, TheWaitForGraphMarksTheCulpritAndParsesWithGraphviz) {
  TempDir dir;
  Job job = SimulateAndLoad(dir, "seed-hang@rank=3");
  const Diagnosis d = Diagnose(job);
  const std::string dot = WaitGraphDot(job, d);
  EXPECT_EQ(dot.rfind("digraph waits {", 0), 0u);
  // Rank 1 (in the broadcast) waits for rank 3, the culprit, whose class is red.
  EXPECT_NE(dot.find("[label=\"ranks 0,2-7 (7)\\nMPI_Allreduce #"), std::string::npos) << dot;
  EXPECT_NE(dot.find("\\nculprit: rank 3\", color=red"), std::string::npos) << dot;
  EXPECT_NE(dot.find("rank 1 (1)\\nMPI_Bcast #"), std::string::npos) << dot;
  EXPECT_NE(dot.find("label=\"waits for 3\""), std::string::npos) << dot;
  ExpectGraphvizDraws(dot, dir);
  ExpectGraphvizDraws(StackTreeDot(job, d, MergeStacks(job)), dir);
}

TEST(Pictures, ADeadlocksCycleIsRed) {
  TempDir dir;
  Job job = SimulateAndLoad(dir, "p2p-deadlock@rank=0");
  const Diagnosis d = Diagnose(job);
  ASSERT_EQ(d.verdict, Verdict::kDeadlock) << d.summary;
  const std::string dot = WaitGraphDot(job, d);
  EXPECT_NE(dot.find("color=red, penwidth=2]"), std::string::npos) << dot;
  ExpectGraphvizDraws(dot, dir);
}

TEST(Pictures, ThePerfettoTraceIsValidTraceEventFormat) {
  TempDir dir;
  Job job = SimulateAndLoad(dir, "seed-hang@rank=3");
  std::string out = dir.path() + "/trace.json", err;
  ASSERT_TRUE(WritePerfetto(job, Diagnose(job), out, &err)) << err;
  std::ifstream in(out);
  nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_TRUE(j["traceEvents"].is_array());
  std::map<uint64_t, int> flow_ends;  // id -> 1 start, 2 finish
  size_t thread_names = 0, process_names = 0, slices = 0, open = 0;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e.at("ph");
    ASSERT_TRUE(e.contains("pid")) << e;
    if (ph == "M") {
      const std::string name = e.at("name");
      ASSERT_TRUE(name == "process_name" || name == "thread_name" || name == "process_sort_index") << e;
      ASSERT_TRUE(e.at("args").is_object()) << e;
      thread_names += name == "thread_name";
      if (name == "process_name") {
        ++process_names;
        EXPECT_NE(e["args"]["name"].get<std::string>().find("(node0000, pid "), std::string::npos) << e;
      }
      continue;
    }
    ASSERT_TRUE(e.contains("ts") && e["ts"].is_number()) << e;
    ASSERT_TRUE(e.contains("tid")) << e;
    if (ph == "X") {
      ASSERT_TRUE(e.contains("dur") && e["dur"].get<double>() >= 0) << e;
      ASSERT_TRUE(e.contains("name")) << e;
      ++slices;
      open += e["name"].get<std::string>().find("(in flight)") != std::string::npos;
    } else if (ph == "s" || ph == "f") {
      ASSERT_TRUE(e.contains("id")) << e;
      if (ph == "f") {
        ASSERT_EQ(e.value("bp", ""), "e") << e;
      }
      flow_ends[e["id"].get<uint64_t>()] |= ph == "s" ? 1 : 2;
    } else {
      ASSERT_EQ(ph, "i") << e;
    }
  }
  EXPECT_EQ(process_names, 8u);  // a track group per rank
  EXPECT_EQ(open, 8u);           // every rank is stuck in one call
  EXPECT_GT(slices, 8u * 50);
  EXPECT_GE(thread_names, 8u);
  ASSERT_FALSE(flow_ends.empty()) << "no arrow from a waiting call to the call it waits for";
  for (const auto& [id, ends] : flow_ends) EXPECT_EQ(ends, 3) << "flow " << id << " lacks an end";
}

TEST(Analyze, CommandLineTextAndJson) {
  TempDir dir;
  SimulateAndLoad(dir, "p2p-deadlock@rank=0");
  auto text = testing::RunProgram({HT_CLI, "analyze", dir.path()}, {});
  EXPECT_EQ(text.exit_code, 3) << "a deadlock found: " << text.err;
  EXPECT_EQ(text.out.rfind("hangtrace: DEADLOCK: ", 0), 0u) << text.out;
  EXPECT_NE(text.out.find("cycles of waits:"), std::string::npos);
  auto json = testing::RunProgram({HT_CLI, "analyze", "--format", "json", dir.path()}, {});
  ASSERT_EQ(json.exit_code, 3) << json.err;
  nlohmann::json j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["verdict"], "deadlock");
  ASSERT_EQ(j["cycles"].size(), 1u);
  EXPECT_EQ(j["cycles"][0].size(), 2u);
  // The same as data: the cycle's ranks, ranks as lists beside the ranges.
  ASSERT_EQ(j["cycle_ranks"].size(), 1u);
  EXPECT_EQ(j["cycle_ranks"][0].size(), 2u);
  EXPECT_EQ(j["schema"], "hangtrace.analysis/1");
  EXPECT_EQ(j["basis"], "trace");
  for (const auto& g : j["groups"]) EXPECT_EQ(g["rank_list"].size(), g["count"].get<size_t>());
  EXPECT_TRUE(j["culprits"][0]["rank"].is_number_integer());
  EXPECT_FALSE(j["stacks"].is_null());
  auto none = testing::RunProgram({HT_CLI, "analyze", dir.path() + "/nothing-here"}, {});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("no such file or folder"), std::string::npos) << none.err;
}

// A dump of untraced processes, written as `hangtrace dump` writes it:
// rank r's main thread has `stack` (innermost first); rank -1: no rank.
struct Untraced {
  int32_t rank;
  std::vector<std::string> stack;
  std::string state = "S";
};
void WriteNodeDump(const std::string& folder, const std::vector<Untraced>& procs, int32_t world) {
  NodeDump node;
  node.host = "n1";
  node.job = "seed";
  int32_t pid = 1000;
  for (const Untraced& u : procs) {
    NodeProcess p;
    p.pid = ++pid;
    p.rank = u.rank;
    p.world_size = u.rank >= 0 ? world : -1;
    p.rank_from = u.rank >= 0 ? "SLURM_PROCID" : "";
    p.liveness = u.state == "T" ? Liveness::kStopped : Liveness::kRunning;
    p.state_before = p.state_after = u.state;
    NodeThread t;
    t.tid = uint32_t(p.pid);
    t.method = "ptrace";
    for (const std::string& f : u.stack) {
      Frame frame;
      frame.func = f;
      frame.module = "/usr/lib/libmpi.so.40";
      t.frames.push_back(frame);
    }
    p.threads.push_back(t);
    node.processes.push_back(p);
  }
  std::filesystem::create_directories(folder);
  std::ofstream(folder + "/node.json") << NodeToJson(node).dump();
}

TEST(Analyze, StacksOnlyGroupsRanksByTheirInnermostCommunicationCall) {
  TempDir dir;
  WriteNodeDump(dir.path() + "/n1",
                {{0, {"__sched_yield", "ompi_request_default_wait", "PMPI_Allreduce", "train_step", "main"}},
                 {1, {"poll", "PMPI_Bcast", "aggregate_loss", "main"}},
                 {2, {"__sched_yield", "PMPI_Allreduce", "train_step", "main"}},
                 {3, {"__sched_yield", "MPI_Allreduce", "train_step", "main"}},
                 {4, {"expf", "forward", "main"}},
                 {-1, {"pause", "main"}}},
                5);
  Job job = LoadJob({dir.path()});
  // One look: where each rank is, never since when; nobody named.
  Diagnosis d = Diagnose(job);
  EXPECT_EQ(VerdictName(d.verdict), std::string("unknown"));
  EXPECT_TRUE(d.culprits.empty()) << d.summary;
  EXPECT_EQ(d.summary.find("stacks only: ranks 0,2-3 in MPI_Allreduce, rank 1 in MPI_Bcast, rank 4 in no "
                           "communication call (in expf). One look at a running job"),
            0u)
      << d.summary;
  // Two looks, nobody moved between them, rank 4 not running: named.
  d = Diagnose(job, &job);
  EXPECT_EQ(d.basis, "stacks");
  EXPECT_EQ(d.from_stacks.ToString(), "0-4");
  EXPECT_TRUE(d.with_trace.Empty());
  EXPECT_EQ(VerdictName(d.verdict), std::string("hang"));
  EXPECT_EQ(d.summary,
            "stacks only: ranks 0,2-3 in MPI_Allreduce, rank 1 in MPI_Bcast, rank 4 in no communication call (in expf)")
      << d.summary;
  ASSERT_EQ(d.culprits.size(), 1u);
  EXPECT_EQ(d.culprits[0].rank, 4);
  EXPECT_NE(d.culprits[0].why.find("while ranks 0-3 wait in MPI_Allreduce, MPI_Bcast"), std::string::npos)
      << d.culprits[0].why;
  bool said = false;
  for (const std::string& w : job.warnings) said |= w.find("no rank in its environment") != std::string::npos;
  EXPECT_TRUE(said) << "the process without a rank is named";
  // The merged stacks carry every rank.
  EXPECT_NE(TextReport(job, d).find("PMPI_Bcast  [1]"), std::string::npos) << TextReport(job, d);
  // Running on a CPU (state R): at work, a long step or a loop that never
  // ends, which two looks seconds apart cannot tell; nobody is named.
  TempDir running;
  WriteNodeDump(running.path() + "/n1",
                {{0, {"__sched_yield", "PMPI_Allreduce", "train_step", "main"}},
                 {1, {"__sched_yield", "PMPI_Allreduce", "train_step", "main"}},
                 {2, {"expf", "forward", "main"}, "R"}},
                3);
  const Job busy = LoadJob({running.path()});
  d = Diagnose(busy, &busy);
  EXPECT_EQ(VerdictName(d.verdict), std::string("unknown")) << d.summary;
  EXPECT_TRUE(d.culprits.empty()) << d.summary;
  EXPECT_NE(d.summary.find("rank 2 is at work outside any communication call (running on a CPU)"), std::string::npos)
      << d.summary;
}

TEST(Analyze, StacksOnlyAllInOneCallIsBelowMpiAndAllComputingIsNoHang) {
  TempDir one, none;
  WriteNodeDump(one.path() + "/n1", {{0, {"PMPI_Barrier", "main"}}, {1, {"PMPI_Barrier", "main"}}}, 2);
  const Job in_barrier = LoadJob({one.path()});
  EXPECT_EQ(VerdictName(Diagnose(in_barrier).verdict), std::string("unknown")) << "one look";
  Diagnosis d = Diagnose(in_barrier, &in_barrier);  // two looks, nobody moved
  EXPECT_EQ(VerdictName(d.verdict), std::string("hang"));
  EXPECT_TRUE(d.below);
  EXPECT_TRUE(d.culprits.empty());
  WriteNodeDump(none.path() + "/n1", {{0, {"expf", "main"}}, {1, {"logf", "main"}}}, 2);
  d = Diagnose(LoadJob({none.path()}));
  EXPECT_EQ(VerdictName(d.verdict), std::string("no-hang")) << d.summary;
  // A stopped rank is the culprit of those that wait.
  TempDir stopped;
  WriteNodeDump(stopped.path() + "/n1", {{0, {"PMPI_Barrier", "main"}}, {1, {"compute", "main"}, "T"}}, 2);
  d = Diagnose(LoadJob({stopped.path()}));  // one look: a stopped rank cannot come
  EXPECT_EQ(VerdictName(d.verdict), std::string("hang"));
  ASSERT_EQ(d.culprits.size(), 1u);
  EXPECT_EQ(d.culprits[0].rank, 1);
  EXPECT_NE(d.culprits[0].why.find("stopped"), std::string::npos);
}

TEST(Analyze, ARankWhoseMainThreadWasReadOnlyInTheKernelIsNotCalledOutsideAnyCall) {
  // The dump left rank 2's main thread running (in the kernel, or starved):
  // /proc/TID/stack gave its kernel frames and its memory its Python line,
  // but no native frame says whether it is inside MPI (mpi4py's Allreduce
  // runs below that line). Its helper thread's stack is whole. It was
  // called "in no communication call (in [kernel] __do_sys_sched_yield)"
  // and the culprit, while it waited in MPI_Allreduce like the others.
  TempDir dir;
  WriteNodeDump(dir.path() + "/n1",
                {{0, {"__sched_yield", "PMPI_Allreduce", "main"}}, {1, {"__sched_yield", "PMPI_Allreduce", "main"}}},
                3);
  NodeDump node;
  std::string error;
  ASSERT_TRUE(ReadNodeDump(dir.path() + "/n1", &node, &error)) << error;
  NodeProcess p = node.processes[0];
  p.pid = 2000;
  p.rank = 2;
  p.threads.clear();
  NodeThread main_thread;
  main_thread.tid = 2000;
  main_thread.method = "proc";
  main_thread.error = "running in the kernel (or starved) while looked at: not stopped";
  Frame kernel, gap, line;
  kernel.lang = Frame::Lang::kKernel;
  kernel.func = "__do_sys_sched_yield+0xa/0x20";
  gap.func = Frame::kNativeNotRead;
  line.lang = Frame::Lang::kPython;
  line.func = "train_step";
  line.file = "/home/user/train.py";
  line.line = 70;
  main_thread.frames = {kernel, gap, line};
  NodeThread helper;
  helper.tid = 2001;
  helper.method = "blocked";
  Frame poll, progress;
  poll.func = "poll";
  progress.func = "progress_engine";
  progress.module = poll.module = "/usr/lib/libopen-pal.so.40";
  helper.frames = {poll, progress};
  p.threads = {main_thread, helper};
  node.processes.push_back(p);
  std::ofstream(dir.path() + "/n1/node.json") << NodeToJson(node).dump();

  Job job = LoadJob({dir.path()});
  Diagnosis d = Diagnose(job);
  EXPECT_EQ(d.summary.find("in no communication call"), std::string::npos) << d.summary;
  EXPECT_NE(d.summary.find("rank 2 unknown (its main thread's native stack was not read) at train_step (train.py:70)"),
            std::string::npos)
      << d.summary;
  for (const Culprit& c : d.culprits) EXPECT_NE(c.rank, 2) << d.summary;
  const std::string text = TextReport(job, d);
  EXPECT_NE(text.find("train.py:70"), std::string::npos) << "its Python line is still said:\n" << text;
}

TEST(Analyze, TracedAndUntracedRanksOfOneDumpAreBothUsed) {
  TempDir dir;
  SimulateAndLoad(dir, "stop@rank=1", 2, 1, 2);
  // Rank 1 has no trace file; a dump found it stopped, rank from its environment.
  for (const std::string& f : testing::ListTraceFiles(dir.path())) {
    std::string err;
    auto s = ReadTraceFile(f, &err, {.events = false});
    if (s && s->process.rank == 1) std::filesystem::remove(f);
  }
  WriteNodeDump(dir.path() + "/sim", {{1, {"compute", "main"}, "T"}}, 4);
  Job job = LoadJob({dir.path()});
  Diagnosis d = Diagnose(job);
  EXPECT_EQ(d.basis, "trace");
  EXPECT_EQ(d.with_trace.ToString(), "0,2-3");
  EXPECT_EQ(d.from_stacks.ToString(), "1");
  ASSERT_EQ(d.culprits.size(), 1u) << d.summary;
  EXPECT_EQ(d.culprits[0].rank, 1);
  EXPECT_NE(d.culprits[0].why.find("is stopped (state T when dumped, untraced)"), std::string::npos) << d.culprits[0].why;
  EXPECT_NE(TextReport(job, d).find("rank 1 from its stacks only"), std::string::npos);
}

}  // namespace
}  // namespace hangtrace

namespace hangtrace {
namespace {

// Compacts every trace file of `from` into `to`; how many were cut (their
// copy holds fewer records than the file).
size_t CompactFolder(const std::string& from, const std::string& to, uint64_t budget) {
  size_t cut = 0;
  std::string err;
  for (const std::string& path : FindTraceFiles(from, &err)) {
    int in = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    const std::string name = to + "/" + std::filesystem::path(path).filename().string();
    int out = open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    CompactCopyStats stats;
    EXPECT_TRUE(WriteCompactCopy(in, path, out, budget, &stats, &err)) << err;
    close(in);
    close(out);
    auto whole = ReadTraceFile(path, &err), compact = ReadTraceFile(name, &err);
    EXPECT_TRUE(whole && compact) << err;
    if (whole && compact) {
      EXPECT_TRUE(compact->warnings.empty()) << compact->warnings.front();
      EXPECT_TRUE(compact->header.features & fmt::kFeatCompact);
      cut += compact->events.size() < whole->events.size();
    }
  }
  return cut;
}

// What the record scan found of a rank, as text: its call, its
// communicators' counts, its point-to-point traffic, its open requests
// (communicators by label: their indexes follow the loaders' order).
std::string ScanOf(const Job& job, const RankView& v) {
  auto comm = [&](int32_t c) { return c >= 0 && size_t(c) < job.comms.size() ? job.comms[size_t(c)].label : "-"; };
  std::set<std::string> entered, p2p;
  for (const auto& [c, n] : v.entered) entered.insert(comm(c) + ":" + std::to_string(n));
  for (const P2pTraffic& t : v.p2p) {
    p2p.insert("(" + comm(t.comm) + "," + std::to_string(t.peer) + "," + std::to_string(t.tag) + ": sent " +
               std::to_string(t.sent) + " received " + std::to_string(t.received) + " wildcard " +
               std::to_string(t.wildcard_taken) + " persistent " + std::to_string(t.persistent_sends) + ")");
  }
  std::string s = "in " + std::to_string(int(v.current.op)) + " on " + comm(v.current.comm) + " seq " +
                  std::to_string(v.current.seq) + "; entered";
  for (const std::string& e : entered) s += " " + e;
  s += "; p2p";
  for (const std::string& e : p2p) s += " " + e;
  s += "; pending";
  for (const CallPoint& c : v.pending) s += " " + std::to_string(c.handle) + "@" + std::to_string(c.seq);
  return s;
}

// The trainer's fault catalogue, simulated with a long history (the fault at
// step 38 of 40), each file compacted to the default budget: the same
// diagnosis, and the same record scan for every rank.
class CompactDump : public ::testing::TestWithParam<std::string> {};

TEST_P(CompactDump, GivesTheDiagnosisOfTheWholeFiles) {
  TempDir whole, compact;
  SimConfig cfg;
  cfg.tp = cfg.pp = cfg.dp = 2;
  cfg.steps = 40;
  cfg.out = whole.path();
  cfg.threads = 1;
  trainer::Fault f;
  std::string err;
  const trainer::FaultInfo* info = nullptr;
  for (const trainer::FaultInfo& i : trainer::kFaults) {
    if (i.name == GetParam()) info = &i;
  }
  ASSERT_TRUE(info);
  const trainer::FaultKind kind = info->kind;
  const int rank = trainer::EligibleRanks(kind, trainer::Shape{2, 2, 2}).back();
  ASSERT_TRUE(trainer::ParseFault(GetParam() + "@rank=" + std::to_string(rank) + ",step=38", &f, &err)) << err;
  cfg.faults.push_back(f);
  SimResult sim;
  ASSERT_TRUE(Simulate(cfg, &sim, &err)) << err;
  EXPECT_GT(CompactFolder(whole.path(), compact.path(), kCompactBudgetBytes), 0u) << "nothing was cut: no test";
  Job a = LoadJob({whole.path()}), b = LoadJob({compact.path()});
  Diagnosis da = Diagnose(a), db = Diagnose(b);
  EXPECT_EQ(db.summary, da.summary);
  EXPECT_EQ(VerdictName(db.verdict), VerdictName(da.verdict));
  ASSERT_EQ(a.ranks.size(), b.ranks.size());
  for (size_t r = 0; r < a.ranks.size(); ++r) EXPECT_EQ(ScanOf(b, b.ranks[r]), ScanOf(a, a.ranks[r])) << "rank " << r;
}

std::vector<std::string> FaultNames() {
  std::vector<std::string> out;
  for (const trainer::FaultInfo& info : trainer::kFaults) out.push_back(info.name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Faults, CompactDump, ::testing::ValuesIn(FaultNames()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           for (char& ch : n) if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

// The history a tail would lose, far behind it: a send request never
// completed, wildcard receives (counted), sends on a tag last used long ago,
// a completed request: the compact copy keeps what the scan needs of it.
TEST(CompactCopy, KeepsTheOldRecordsTheScanNeeds) {
  TempDir whole, compact;
  FileSpec spec;
  fmt::ProcessInfo& p = spec.process;
  p.pid = 4242;
  p.rank = 0;
  p.world_size = 2;
  p.rank_source = uint8_t(fmt::RankSource::kMpi);
  p.state = uint32_t(fmt::ProcState::kRunning);
  snprintf(p.host, sizeof(p.host), "node0");
  snprintf(p.job, sizeof(p.job), "old");
  p.clock.kind = uint32_t(fmt::ClockKind::kMonotonicNs);
  p.clock.ticks_hz = 1000000000;
  p.clock.version = 2;
  enum { kIsend, kWait, kSend, kRecv, kAllreduce, kSendInit };
  const struct {
    const char* name;
    fmt::Op op;
    uint8_t flags;
  } calls[] = {{"MPI_Isend", fmt::Op::kSend, fmt::kCallP2p | fmt::kCallNonblocking},
               {"MPI_Wait", fmt::Op::kWait, fmt::kCallCompletion | fmt::kCallBlocking},
               {"MPI_Send", fmt::Op::kSend, fmt::kCallP2p | fmt::kCallBlocking},
               {"MPI_Recv", fmt::Op::kRecv, fmt::kCallP2p | fmt::kCallBlocking},
               {"MPI_Allreduce", fmt::Op::kAllreduce, fmt::kCallCollective | fmt::kCallBlocking},
               {"MPI_Send_init", fmt::Op::kSend, fmt::kCallP2p}};
  for (const auto& c : calls) {
    fmt::CallInfo ci{};
    strncpy(ci.name, c.name, sizeof(ci.name) - 1);
    ci.api = uint8_t(fmt::Api::kMpi);
    ci.op = uint8_t(c.op);
    ci.flags = c.flags;
    spec.calls.push_back(ci);
  }
  FileSpec::Comm world;
  world.entry.id = fmt::kWorldCommId;
  world.entry.kind = uint8_t(fmt::CommKind::kMpi);
  world.entry.flags = fmt::kCommWorld;
  world.entry.size = 2;
  world.entry.color = world.entry.key = world.entry.device = -1;
  spec.comms.push_back(world);
  FileSpec::Thread th;
  th.tid = 4242;
  uint64_t t = 1000;
  auto rec = [&](int call, fmt::EventKind kind, uint64_t seq, int32_t peer, int32_t tag, uint64_t handle = 0,
                 uint8_t flags = 0) {
    fmt::Record r{};
    r.ticks = t += 1000;
    r.seq = seq;
    r.tid = th.tid;
    r.call = uint16_t(call);
    r.comm = 0;
    r.peer = peer;
    r.tag = tag;
    r.handle = handle;
    r.kind = uint8_t(kind);
    r.flags = flags;
    th.records.push_back(r);
    return r;
  };
  rec(kIsend, fmt::EventKind::kBegin, 1, 1, 5, 0x111);  // never completed
  rec(kIsend, fmt::EventKind::kBegin, 2, 1, 5, 0x222);
  rec(kIsend, fmt::EventKind::kEnd, 2, 1, 5, 0x222);    // completed
  for (uint64_t s = 1; s <= 10; ++s) {
    rec(kSend, fmt::EventKind::kBegin, s, 1, 7);
    rec(kSend, fmt::EventKind::kEnd, s, 1, 7);
  }
  for (uint64_t s = 1; s <= 3; ++s) {
    rec(kRecv, fmt::EventKind::kBegin, 0, fmt::kAnyPeer, 3, 0, fmt::kRecAnyPeer);
    rec(kRecv, fmt::EventKind::kEnd, s, 1, 3, 0, fmt::kRecAnyPeer);
  }
  rec(kSendInit, fmt::EventKind::kMark, 0, 1, 9);
  rec(kSendInit, fmt::EventKind::kMark, 0, 1, 9);
  uint64_t seq = 0;
  for (int i = 0; i < 3000; ++i) {
    rec(kAllreduce, fmt::EventKind::kBegin, ++seq, fmt::kNoPeer, 0);
    th.last = rec(kAllreduce, fmt::EventKind::kEnd, seq, fmt::kNoPeer, 0);
  }
  th.has_last = true;
  th.current = rec(kAllreduce, fmt::EventKind::kBegin, ++seq, fmt::kNoPeer, 0);
  th.in_call = true;
  spec.comms[0].entry.coll_seq = seq;
  spec.threads.push_back(th);
  std::string err;
  ASSERT_TRUE(WriteTraceFile(whole.path() + "/node0.4242.htrace", spec, &err)) << err;
  ASSERT_EQ(CompactFolder(whole.path(), compact.path(), kCompactBudgetBytes), 1u);
  auto copy = ReadTraceFile(compact.path() + "/node0.4242.htrace", &err);
  ASSERT_TRUE(copy) << err;
  EXPECT_LE(copy->events.size(), 1000u);
  Job a = LoadJob({whole.path()}), b = LoadJob({compact.path()});
  ASSERT_EQ(a.ranks.size(), 2u);
  ASSERT_EQ(b.ranks.size(), 2u);
  const std::string scan = ScanOf(a, a.ranks[0]);
  EXPECT_NE(scan.find("pending 273@1"), std::string::npos) << scan;  // 0x111
  EXPECT_NE(scan.find("wildcard 3"), std::string::npos) << scan;
  EXPECT_NE(scan.find("persistent 2"), std::string::npos) << scan;
  EXPECT_EQ(ScanOf(b, b.ranks[0]), scan);
  // Without the archive lane the tail alone would have lost them all.
  uint64_t bytes = 0;
  struct stat st;
  if (stat((compact.path() + "/node0.4242.htrace").c_str(), &st) == 0) bytes = uint64_t(st.st_blocks) * 512;
  EXPECT_LE(bytes, kCompactBudgetBytes);
}

}  // namespace
}  // namespace hangtrace
