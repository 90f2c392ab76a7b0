// hangtrace dump against live processes: a traced program parked in known
// functions (tests/progs/traced_prog.c park), running, SIGSTOPped or dead.
// The dump must read every thread's stack from outside, leave the target
// exactly as it found it, and write a folder that `hangtrace analyze` reads.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <numeric>
#include <sstream>
#include <set>
#include <string>

#include "merger/node_dump.h"
#include "tracer/format.h"
#include "tests/test_util.h"

namespace hangtrace {
namespace {

using testing::ProgramResult;
using testing::RunProgram;
using testing::TempDir;

// traced_prog park N under the preloaded library, until it says "parked".
class Parked {
 public:
  Parked(const TempDir& dir, int threads) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      setenv("LD_PRELOAD", HT_PRELOAD, 1);
      setenv("HANGTRACE_DIR", dir.path().c_str(), 1);
      setenv("HANGTRACE_JOB", "job", 1);
      setenv("RANK", "0", 1);
      std::string n = std::to_string(threads);
      execl(HT_PROG, HT_PROG, "park", n.c_str(), nullptr);
      _exit(127);
    }
    close(fds[1]);
    std::string seen;
    char buf[256];
    while (seen.find("parked") == std::string::npos) {
      ssize_t k = read(fds[0], buf, sizeof(buf));
      if (k <= 0) break;
      seen.append(buf, size_t(k));
    }
    close(fds[0]);
    EXPECT_NE(seen.find("parked"), std::string::npos);
    usleep(100 * 1000);  // the threads reach pause()
  }
  ~Parked() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  // SIGUSR1 makes it exit 0: proof that it runs (and was not left stopped).
  int Finish() {
    kill(pid_, SIGCONT);
    kill(pid_, SIGUSR1);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
};

std::string Status(pid_t pid, const std::string& key) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind(key + ":", 0) == 0) {
      std::string v = line.substr(key.size() + 1);
      return v.substr(v.find_first_not_of(" \t"));
    }
  }
  return "";
}

nlohmann::json Dump(const TempDir& dir, const std::string& out, std::vector<std::string> extra = {},
                    std::string* err = nullptr) {
  // One look, into OUT/<host> (what each look of the default two holds).
  std::vector<std::string> argv = {HT_CLI, "dump", "--dir", dir.path(), "--job", "job", "--out", out, "--looks", "1"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  ProgramResult r = RunProgram(argv, {}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  if (err) *err = r.err;
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::ifstream f(out + "/" + host + "/node.json");
  EXPECT_TRUE(f.good()) << r.err;
  return nlohmann::json::parse(f, nullptr, false);
}

// A frame of the thread is the function `name`: its stack is one of the
// node's distinct `stacks` (frames are objects with func, file, line,
// module, offset, lang).
bool HasFrame(const nlohmann::json& node, const nlohmann::json& thread, const std::string& name) {
  if (!thread.contains("stack")) return false;
  for (const auto& f : node["stacks"].at(thread["stack"].get<size_t>())) {
    if (f.value("func", "") == name) return true;
  }
  return false;
}

TEST(Dump, ReadsEveryThreadOfARunningProcessAndLeavesItRunning) {
  TempDir dir, out;
  Parked p(dir, 4);
  nlohmann::json node = Dump(dir, out.path());
  ASSERT_EQ(node["processes"].size(), 1u) << node.dump(1);
  const auto& proc = node["processes"][0];
  EXPECT_EQ(proc["pid"], p.pid());
  EXPECT_EQ(proc["rank"], 0);
  EXPECT_EQ(proc["state_before"], "S");
  // Running again (S, or R for the moment it takes to get back to pause()).
  EXPECT_TRUE(proc["state_after"] == "S" || proc["state_after"] == "R") << proc["state_after"];
  // main + 4 parked + hangtrace's own thread.
  ASSERT_EQ(proc["threads"].size(), 6u);
  int parked = 0, main_stuck = 0;
  for (const auto& t : proc["threads"]) {
    // Blocked in a call: read where it waits; running: stopped briefly.
    EXPECT_TRUE(t["method"] == "blocked" || t["method"] == "ptrace") << t.dump();
    if (HasFrame(node, t, "parked_thread")) {
      EXPECT_EQ(t["method"], "blocked") << "a parked thread was stopped";
    }
    parked += HasFrame(node, t, "parked_thread");
    main_stuck += HasFrame(node, t, "stuck_in_here") && HasFrame(node, t, "main");
  }
  EXPECT_EQ(parked, 4);
  EXPECT_EQ(main_stuck, 1);
  // The node's pre-merge: the 4 parked threads share one stack.
  bool grouped = false;
  for (const auto& g : node["stack_groups"]) grouped |= g["ranks"] == "0";
  EXPECT_TRUE(grouped);
  EXPECT_EQ(Status(p.pid(), "TracerPid"), "0");
  EXPECT_EQ(p.Finish(), 0);
}

// The node's pre-merge: the four parked threads share one stack, held once.
TEST(Dump, ADistinctStackIsHeldOnceAndVersionOneFilesAreStillRead) {
  TempDir dir, out;
  Parked p(dir, 4);
  nlohmann::json node = Dump(dir, out.path());
  ASSERT_EQ(node["schema"], "hangtrace.node/2");
  const auto& threads = node["processes"][0]["threads"];
  std::map<size_t, int> users;
  for (const auto& t : threads) {
    if (t.contains("stack")) ++users[t["stack"].get<size_t>()];
  }
  EXPECT_LE(node["stacks"].size(), threads.size() - 3) << node["stacks"].dump();
  int shared = 0;
  for (const auto& [stack, n] : users) shared = std::max(shared, n);
  EXPECT_GE(shared, 4) << "the parked threads' stack is not shared";
  // What the reader makes of it: every thread with its frames again.
  NodeDump read;
  std::string err;
  ASSERT_TRUE(NodeFromJson(node, &read, &err)) << err;
  size_t with_frames = 0;
  for (const NodeThread& t : read.processes[0].threads) with_frames += !t.frames.empty();
  EXPECT_EQ(with_frames, users.empty() ? 0u : size_t(std::accumulate(users.begin(), users.end(), 0,
                                                                    [](int a, const auto& u) { return a + u.second; })));
  // A version 1 file: frames inline.
  nlohmann::json v1 = {{"schema", "hangtrace.node/1"},
                       {"processes", {{{"pid", 7}, {"rank", 0}, {"threads", {{{"tid", 7}, {"frames", {{{"func", "main"}}}}}}}}}}};
  NodeDump old;
  ASSERT_TRUE(NodeFromJson(v1, &old, &err)) << err;
  ASSERT_EQ(old.processes.at(0).threads.at(0).frames.size(), 1u);
  EXPECT_EQ(old.processes[0].threads[0].frames[0].func, "main");
}

TEST(Dump, AStoppedProcessStaysStopped) {
  TempDir dir, out;
  Parked p(dir, 2);
  kill(p.pid(), SIGSTOP);
  usleep(50 * 1000);
  ASSERT_EQ(Status(p.pid(), "State").substr(0, 1), "T");
  nlohmann::json node = Dump(dir, out.path());
  const auto& proc = node["processes"][0];
  EXPECT_EQ(proc["state_before"], "T");
  EXPECT_EQ(proc["state_after"], "T");
  int unwound = 0;
  // A stopped thread is in no system call it could leave: read where it is.
  for (const auto& t : proc["threads"]) unwound += t["method"] == "blocked" && HasFrame(node, t, "parked_thread");
  EXPECT_EQ(unwound, 2);
  usleep(50 * 1000);
  EXPECT_EQ(Status(p.pid(), "State").substr(0, 1), "T") << "the dump must not resume a stopped process";
  EXPECT_EQ(Status(p.pid(), "TracerPid"), "0");
  EXPECT_EQ(p.Finish(), 0);
}

TEST(Dump, ADeadProcessLeavesItsTraceFileAndTheAnalysisReadsTheFolder) {
  TempDir dir, out;
  {
    Parked p(dir, 1);
  }  // SIGKILLed inside its region
  nlohmann::json node = Dump(dir, out.path());
  ASSERT_EQ(node["processes"].size(), 1u);
  EXPECT_EQ(node["processes"][0]["liveness"], "gone");
  EXPECT_TRUE(node["processes"][0]["threads"].empty());
  ProgramResult r = RunProgram({HT_CLI, "analyze", "--format", "json", out.path()}, {}, 30);
  ASSERT_EQ(r.exit_code, 3) << "killed in a call: a crash found; " << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ranks_with_trace"], "0");
}

// A file the compaction cannot read is copied whole, and the dump says so
// (the analysis then names what is wrong with it).
TEST(Dump, AFileThatCannotBeCompactedIsCopiedWholeAndSaysSo) {
  TempDir dir, out;
  {
    Parked p(dir, 1);
  }
  std::string file;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/job")) {
    if (e.path().extension() == ".htrace") file = e.path();
  }
  ASSERT_FALSE(file.empty());
  {
    const uint32_t wrong_record_size = 32;
    int fd = open(file.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, &wrong_record_size, sizeof(wrong_record_size), offsetof(fmt::FileHeader, record_size)),
              ssize_t(sizeof(wrong_record_size)));
    close(fd);
  }
  std::string err;
  nlohmann::json node = Dump(dir, out.path(), {}, &err);
  bool said = false;
  for (const auto& w : node.value("warnings", nlohmann::json::array())) {
    said = said || w.get<std::string>().find("copied whole, since it could not be compacted") != std::string::npos;
  }
  EXPECT_TRUE(said) << node.dump();
  EXPECT_NE(err.find(", 1 trace file(s) "), std::string::npos) << err;  // copied, and counted as such
}

TEST(Dump, StacksFromTheDumpReachTheMergedTree) {
  TempDir dir, out;
  Parked p(dir, 3);
  Dump(dir, out.path());
  ProgramResult r = RunProgram({HT_CLI, "analyze", out.path()}, {}, 30);
  // Parked in a call for a moment, which no earlier call of its kind says
  // is long, beside a watchdog of 120 s: one look cannot call it a hang.
  ASSERT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("UNKNOWN: one look at a running job"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("parked_thread"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stuck_in_here"), std::string::npos) << r.out;
}

TEST(Dump, RefusesAnotherUsersProcess) {
  TempDir dir, out;
  Parked p(dir, 1);
  chmod(out.path().c_str(), 0777);
  // As nobody, against a process of root's.
  ProgramResult r = RunProgram({"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", HT_CLI, "dump",
                                "--pid", std::to_string(p.pid()), "--out", out.path()},
                               {}, 30);
  EXPECT_EQ(r.exit_code, 1) << "refused, as py-spy refuses: " << r.err;
  EXPECT_NE(r.err.find("belongs to uid 0"), std::string::npos) << r.err;
  EXPECT_EQ(Status(p.pid(), "TracerPid"), "0");
  EXPECT_EQ(p.Finish(), 0);
}

TEST(Dump, AStoppedRanksDumpIsAnalyzedAsItWasWhenTaken) {
  // A dump is a photograph: after the process is gone, its analysis is the
  // same as right after the dump (it once turned into "crash: died").
  TempDir dir, out;
  Parked p(dir, 1);
  kill(p.pid(), SIGSTOP);
  usleep(50 * 1000);
  Dump(dir, out.path());
  ProgramResult before = RunProgram({HT_CLI, "analyze", "--format", "json", out.path()}, {}, 30);
  kill(p.pid(), SIGKILL);
  p.Finish();
  ProgramResult after = RunProgram({HT_CLI, "analyze", "--format", "json", out.path()}, {}, 30);
  auto a = nlohmann::json::parse(before.out), b = nlohmann::json::parse(after.out);
  EXPECT_EQ(a["verdict"], b["verdict"]);
  EXPECT_EQ(a["summary"], b["summary"]);
  EXPECT_EQ(a["groups"][0]["state"], "stopped") << before.out;
  EXPECT_EQ(b["groups"][0]["state"], "stopped") << after.out;
}

TEST(Dump, NeverWritesThroughAPlantedLinkNorCopiesWhatIsNotItsProcesses) {
  TempDir dir, out, secret_dir;
  Parked p(dir, 1);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  // Root's secret, which another user wants.
  const std::string secret = secret_dir.path() + "/secret";
  std::ofstream(secret) << "root's secret\n";
  // 1. A link in the job's trace folder named like a trace file.
  ASSERT_EQ(symlink(secret.c_str(), (dir.path() + "/job/vm.99999.htrace").c_str()), 0);
  // 2. Another user's file there that is no trace file.
  const std::string foreign = dir.path() + "/job/vm.99998.htrace";
  std::ofstream(foreign) << "not a trace file\n";
  chown(foreign.c_str(), 65534, 65534);
  // 3. A link planted where the dump writes node.json (a folder of ours:
  //    say an earlier dump's, where someone left a link).
  ASSERT_EQ(mkdir((out.path() + "/" + host).c_str(), 0700), 0);
  const std::string victim = secret_dir.path() + "/victim";
  std::ofstream(victim) << "untouched\n";
  ASSERT_EQ(symlink(victim.c_str(), (out.path() + "/" + host + "/node.json").c_str()), 0);
  ProgramResult r =
      RunProgram({HT_CLI, "dump", "--dir", dir.path(), "--job", "job", "--out", out.path(), "--looks", "1"}, {}, 60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::ReadFileText(victim), "untouched\n") << "node.json was written through a link";
  struct stat st;
  const std::string node_json = out.path() + "/" + host + "/node.json";
  ASSERT_EQ(lstat(node_json.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(lstat((out.path() + "/" + host).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_NE(access((out.path() + "/" + host + "/vm.99999.htrace").c_str(), F_OK), 0) << "the link was copied";
  EXPECT_NE(access((out.path() + "/" + host + "/vm.99998.htrace").c_str(), F_OK), 0) << "another user's file was copied";
  EXPECT_NE(r.err.find("a symbolic link, not a trace file"), std::string::npos) << r.err;
  // 4. Another user's folder in a shared --out: refused, nothing written.
  TempDir shared;
  chmod(shared.path().c_str(), 0777);
  ASSERT_EQ(mkdir((shared.path() + "/" + host).c_str(), 0777), 0);
  chown((shared.path() + "/" + host).c_str(), 65534, 65534);
  r = RunProgram({HT_CLI, "dump", "--dir", dir.path(), "--job", "job", "--out", shared.path(), "--looks", "1"}, {}, 60);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("belongs to uid 65534"), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(shared.path() + "/" + host));
  // 5. A link planted where the first of two looks goes: refused, not followed.
  TempDir shared2, elsewhere;
  chmod(shared2.path().c_str(), 0777);
  ASSERT_EQ(symlink(elsewhere.path().c_str(), (shared2.path() + "/first").c_str()), 0);
  r = RunProgram({HT_CLI, "dump", "--dir", dir.path(), "--job", "job", "--out", shared2.path()}, {}, 60);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/first is not a folder of its own (a link, or a file): refused"), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(elsewhere.path()));
  EXPECT_FALSE(std::filesystem::exists(shared2.path() + "/second")) << "a second look after a refused first";
}

TEST(Dump, SaysWhenThereIsNothingToDump) {
  TempDir dir, out;
  ProgramResult r = RunProgram({HT_CLI, "dump", "--dir", dir.path(), "--job", "nojob", "--out", out.path()}, {}, 30);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("nothing to dump"), std::string::npos) << r.err;
}

// Another user than the one running the tests (nobody), to run a process as.
const std::vector<std::string> kAsNobody = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"};

std::vector<std::string> AsNobody(std::vector<std::string> argv) {
  argv.insert(argv.begin(), kAsNobody.begin(), kAsNobody.end());
  return argv;
}

TEST(Dump, TheBatchScriptOfASlurmJobIsNoRank) {
  // A batch script's shell carries the job's variables, SLURM_PROCID=0
  // among them, but belongs to no numbered step: where the job has one, its
  // processes are the ranks (it was counted as an untraced rank 0). The job
  // is a user's (no slurmstepd here), dumped by that user.
  TempDir dir, out;
  ASSERT_EQ(chmod(out.path().c_str(), 0777), 0);
  const std::string job = "77" + std::to_string(getpid());
  testing::Started batch(AsNobody({"sleep", "30"}), {{"SLURM_JOB_ID", job}, {"SLURM_PROCID", "0"}, {"SLURM_NPROCS", "2"}});
  testing::Started rank0(AsNobody({"sleep", "30"}), {{"SLURM_JOB_ID", job}, {"SLURM_STEP_ID", "0"},
                                                    {"SLURM_PROCID", "0"}, {"SLURM_NPROCS", "2"}});
  testing::Started rank1(AsNobody({"sleep", "30"}), {{"SLURM_JOB_ID", job}, {"SLURM_STEP_ID", "0"},
                                                    {"SLURM_PROCID", "1"}, {"SLURM_NPROCS", "2"}});
  usleep(200 * 1000);  // each has exec'ed sleep
  ProgramResult r = RunProgram(
      AsNobody({HT_CLI, "dump", "--dir", dir.path(), "--job", job, "--out", out.path(), "--no-stacks", "--looks", "1"}), {}, 30);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string node;
  for (const auto& e : std::filesystem::directory_iterator(out.path())) node = e.path().string() + "/node.json";
  std::ifstream in(node);
  nlohmann::json j = nlohmann::json::parse(in);
  std::set<int> pids;
  for (const auto& p : j["processes"]) pids.insert(p["pid"].get<int>());
  EXPECT_EQ(pids, (std::set<int>{rank0.pid(), rank1.pid()})) << j.dump(1);
}

// Anyone can write SLURM_JOB_ID and a rank into an environment: as root, a
// process counts for a job only under the job's slurmstepd or as the job's
// user (the owner of its trace files). Before, another user's `sleep` with
// such an environment was dumped and became "culprit rank 2".
TEST(Dump, AProcessThatOnlyClaimsAJobInItsEnvironmentIsNotDumped) {
  TempDir dir, out;
  const std::string job = "78" + std::to_string(getpid());
  testing::Started impostor(AsNobody({"sleep", "30"}), {{"SLURM_JOB_ID", job}, {"SLURM_STEP_ID", "0"},
                                                       {"SLURM_PROCID", "2"}, {"SLURM_NPROCS", "4"}});
  usleep(200 * 1000);
  ProgramResult r =
      RunProgram({HT_CLI, "dump", "--dir", dir.path(), "--job", job, "--out", out.path(), "--no-stacks", "--looks", "1"}, {}, 30);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("1 process(es) claim SLURM job " + job +
                       " in their environment but run neither under its slurmstepd nor as its user: not dumped"),
            std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(out.path()));
}

}  // namespace
}  // namespace hangtrace
