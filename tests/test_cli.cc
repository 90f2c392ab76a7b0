// The command line as a user meets it: exit statuses, `hangtrace ls` and
// `clean`, analyze without a path or with several jobs, `run`'s arguments.
#include <gtest/gtest.h>
#include <chrono>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>

#include "tests/test_util.h"

namespace hangtrace {
namespace {

using testing::ProgramResult;
using testing::RunProgram;
using testing::TempDir;

ProgramResult Cli(std::vector<std::string> args, std::vector<std::pair<std::string, std::string>> env = {}) {
  args.insert(args.begin(), HT_CLI);
  return RunProgram(args, env, 60);
}

// A simulated job DIR/<job>/ with `fault` ("" for none).
void Simulate(const TempDir& dir, const std::string& job, const std::string& fault) {
  std::vector<std::string> args = {"simulate", "--out", dir.path(), "--job", job, "--tp", "2", "--pp", "1", "--dp", "2"};
  if (!fault.empty()) args.insert(args.end(), {"--fault", fault});
  ProgramResult r = Cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

// A traced process held in a call, as job "live" of `dir`, once its file is there.
pid_t StartLiveJob(const TempDir& dir) {
  pid_t child = fork();
  if (child == 0) {
    setenv("LD_PRELOAD", HT_PRELOAD, 1);
    setenv("HANGTRACE_DIR", dir.path().c_str(), 1);
    setenv("HANGTRACE_JOB", "live", 1);
    setenv("HANGTRACE_TIMEOUT", "0", 1);
    if (!freopen("/dev/null", "w", stdout)) _exit(126);
    execl(HT_PROG, HT_PROG, "hold", (char*)nullptr);
    _exit(127);
  }
  for (int i = 0; i < 100 && testing::ListTraceFiles(dir.path() + "/live").empty(); ++i) usleep(20000);
  return child;
}

TEST(Cli, AnalyzeExitStatusTellsTheVerdict) {
  TempDir dir;
  Simulate(dir, "healthy", "");
  Simulate(dir, "hung", "stop@rank=1");
  EXPECT_EQ(Cli({"analyze", dir.path() + "/healthy"}).exit_code, 0) << "no hang";
  EXPECT_EQ(Cli({"analyze", dir.path() + "/hung"}).exit_code, 3) << "a hang found";
  EXPECT_EQ(Cli({"analyze", "-f", "json", dir.path() + "/hung"}).exit_code, 3) << "the same in JSON";
  EXPECT_EQ(Cli({"analyze", dir.path() + "/none"}).exit_code, 1) << "could not analyze";
  EXPECT_EQ(Cli({"analyze", "--format", "yaml", dir.path()}).exit_code, 2) << "usage";
  EXPECT_EQ(Cli({"analyze", "--no-such-flag"}).exit_code, 2) << "usage";
  EXPECT_EQ(Cli({"analyze", "--help"}).exit_code, 0);
}

TEST(Cli, AnOutputThatCannotBeWrittenIsSaidAndFailsTheCommand) {
  TempDir dir;
  Simulate(dir, "hung", "stop@rank=1");
  for (const char* option : {"--dot", "--perfetto"}) {
    ProgramResult r = Cli({"analyze", dir.path() + "/hung", option, dir.path() + "/no/such/folder/out"});
    EXPECT_EQ(r.exit_code, 1) << option << ": " << r.err;
    EXPECT_NE(r.err.find("cannot write " + dir.path() + "/no/such/folder/out"), std::string::npos) << r.err;
  }
}

// Run as root in a folder others write, an output name another user
// planted (a link to a file of root's, a file of theirs) is refused and
// what it points at is untouched; our own file is replaced, and no
// temporary is left behind.
TEST(Cli, AnOutputNameAnotherUserPlantedIsRefusedAndNothingIsFollowed) {
  TempDir dir;
  Simulate(dir, "hung", "stop@rank=1");
  const std::string victim = dir.path() + "/victim", link = dir.path() + "/out.json", theirs = dir.path() + "/theirs.dot";
  std::ofstream(victim) << "precious\n";
  ASSERT_EQ(symlink(victim.c_str(), link.c_str()), 0);
  std::ofstream(theirs) << "theirs\n";
  ASSERT_EQ(chown(theirs.c_str(), 65534, 65534), 0);
  for (const auto& [option, path, why] : {std::tuple{"--perfetto", link, "is a symbolic link: refused"},
                                          std::tuple{"--graph", link, "is a symbolic link: refused"},
                                          std::tuple{"--dot", theirs, "belongs to uid 65534, not to this user: refused"}}) {
    ProgramResult r = Cli({"analyze", dir.path() + "/hung", option, path});
    EXPECT_EQ(r.exit_code, 1) << option;
    EXPECT_NE(r.err.find(path + " " + why), std::string::npos) << r.err;
  }
  EXPECT_EQ(testing::ReadFileText(victim), "precious\n");
  EXPECT_EQ(testing::ReadFileText(theirs), "theirs\n");
  const std::string mine = dir.path() + "/graph.dot";
  std::ofstream(mine) << "old\n";
  ProgramResult r = Cli({"analyze", dir.path() + "/hung", "--graph", mine});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(testing::ReadFileText(mine).rfind("digraph", 0), 0u);
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) entries += e.path().filename() != "hung" && e.path().filename() != "hung.truth.json";
  EXPECT_EQ(entries, 4u) << "victim, the link, theirs.dot, graph.dot: no temporary left";
}

TEST(Cli, DumpOfAProcessWithoutARankPrintsItsStacksAsPySpyDoes) {
  TempDir dir;
  testing::Started py({"python3", "-c", "import time\ndef wait_here():\n    time.sleep(60)\nprint('in', flush=True)\nwait_here()\n"},
                      {});
  ASSERT_TRUE(py.WaitFor("in", 10));
  const std::string folder = "hangtrace-dump-" + std::to_string(py.pid());
  ProgramResult r = Cli({"dump", "-p", std::to_string(py.pid())});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Process " + std::to_string(py.pid()) + ": "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Thread " + std::to_string(py.pid()) + " (state S, in clock_nanosleep)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("    wait_here (<string>:3)\n"), std::string::npos) << r.out;  // the Python frame
  EXPECT_NE(r.out.find("  [native]"), std::string::npos) << r.out;                   // and the native ones
  // No folder left behind unless asked (--out): the stacks were the answer.
  EXPECT_TRUE(r.err.find(" -> ") == std::string::npos) << r.err;
  // Asked with --out: analyze and inspect print the same stacks.
  r = Cli({"dump", "-p", std::to_string(py.pid()), "--out", dir.path() + "/d"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ProgramResult a = Cli({"analyze", dir.path() + "/d"});
  EXPECT_EQ(a.exit_code, 1) << a.err;
  EXPECT_NE(a.out.find("wait_here (<string>:3)"), std::string::npos) << a.out;
  EXPECT_NE(a.err.find("no rank"), std::string::npos) << a.err;
  ProgramResult i = Cli({"inspect", dir.path() + "/d"});
  EXPECT_EQ(i.exit_code, 0) << i.err;
  EXPECT_NE(i.out.find("wait_here (<string>:3)"), std::string::npos) << i.out;
}

TEST(Cli, DumpFailsWithTheReasonAsPySpyDoes) {
  ProgramResult r = Cli({"dump", "-p", "999999999"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no process 999999999"), std::string::npos) << r.err;
  // `-p $(pgrep ...)` where pgrep found nothing: said, not a conversion error.
  r = Cli({"dump", "-p", "--out", "/tmp/x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--pid needs process ids"), std::string::npos) << r.err;
}

TEST(Cli, DumpTakesTheJobAnalyzeWouldTake) {
  TempDir dir, out;
  pid_t live = StartLiveJob(dir);  // job "live", the folder's only one
  ProgramResult r = Cli({"dump", "--dir", dir.path(), "--out", out.path(), "--no-stacks", "--looks", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::ListTraceFiles(out.path()).size(), 1u) << r.err;
  // Two jobs, one running and one ended: the running one.
  Simulate(dir, "ended", "");
  TempDir out2;
  r = Cli({"dump", "--dir", dir.path(), "--out", out2.path(), "--no-stacks", "--looks", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::ListTraceFiles(out2.path()).size(), 1u) << r.err;
  kill(live, SIGKILL);
  waitpid(live, nullptr, 0);
  // Two jobs, none running: which one is asked, and nothing is written.
  TempDir out3;
  r = Cli({"dump", "--dir", dir.path(), "--out", out3.path() + "/o", "--no-stacks"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("hangtrace dump --job ended"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out3.path() + "/o"));
}

// The default dump folder ./hangtrace-dump-<job> is a name anyone could
// plant in a shared current folder: a link there is refused, not followed.
TEST(Cli, ThePlantedDefaultDumpFolderIsRefused) {
  TempDir dir, cwd, elsewhere;
  pid_t live = StartLiveJob(dir);
  const std::string planted = cwd.path() + "/hangtrace-dump-live";
  ASSERT_EQ(symlink(elsewhere.path().c_str(), planted.c_str()), 0);
  const std::string dump = "cd " + cwd.path() + " && " + HT_CLI + " dump --dir " + dir.path() + " --no-stacks";
  ProgramResult r = RunProgram({"sh", "-c", dump}, {}, 60);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("hangtrace-dump-live is not a folder of its own (a link, or a file): refused (name the dump "
                       "folder with -o)"), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(elsewhere.path()));
  // Without the link, the default folder is made and used.
  ASSERT_EQ(unlink(planted.c_str()), 0);
  r = RunProgram({"sh", "-c", dump}, {}, 60);
  kill(live, SIGKILL);
  waitpid(live, nullptr, 0);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Its two looks, each in a folder of its own made there: a file each.
  EXPECT_EQ(testing::ListTraceFiles(planted).size(), 2u) << r.err;
  EXPECT_TRUE(std::filesystem::is_directory(planted + "/first")) << r.err;
}

TEST(Cli, MessagesSayTheCause) {
  ProgramResult r = Cli({"run", "--timeout", "-1", "true"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'-1' is not a number of seconds >= 0"), std::string::npos) << r.err;
  EXPECT_LT(r.err.size(), 200u) << "no DBL_MAX in 300 digits: " << r.err;
  r = Cli({"analyze", "/tmp/some/dump/node1/node.json"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("pass the dump's folder: hangtrace analyze /tmp/some/dump/node1"), std::string::npos) << r.err;
  r = Cli({"srun-dump", "12345"});  // no SLURM configured outside the test cluster
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("controller did not answer"), std::string::npos) << r.err;
}

TEST(Cli, InspectSaysTheExitStatusTheShellSees) {
  TempDir dir;
  ProgramResult p = RunProgram({HT_PROG, "exit", "-61"}, {{"LD_PRELOAD", HT_PRELOAD}, {"HANGTRACE_DIR", dir.path()},
                                                         {"HANGTRACE_JOB", "job"}});
  EXPECT_EQ(p.exit_code, 195);
  ProgramResult r = Cli({"inspect", dir.path()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("state    exited with status 195 (exit(-61)) after "), std::string::npos) << r.out;
}

TEST(Cli, LsAndCleanTakeTheFolderWhereverItIsGiven) {
  TempDir dir;
  Simulate(dir, "a", "");
  Simulate(dir, "pp", "");
  ProgramResult r = Cli({"ls", dir.path()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("remove the finished ones: hangtrace clean " + dir.path()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  pretrain_gpt --tp 2 --pp 1 --dp 2  "), std::string::npos) << "what was launched: " << r.out;
  // --job takes one name; the folder after it is the folder.
  r = Cli({"clean", "--job", "pp", dir.path()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/pp"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/a"));
  // A dump written into the trace folder is no job.
  std::filesystem::create_directories(dir.path() + "/mydump/node1");
  std::ofstream(dir.path() + "/mydump/node1/node.json") << "{}";
  std::filesystem::copy(dir.path() + "/a", dir.path() + "/mydump/node1", std::filesystem::copy_options::recursive);
  r = Cli({"ls", dir.path()});
  EXPECT_EQ(r.out.find("mydump"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("is a dump (node.json), not a job"), std::string::npos) << r.err;
}

TEST(Cli, AFolderOfSeveralJobsIsRefusedWithTheJobsListed) {
  // The default parent folder after a few runs: mixing gave a different
  // verdict each time.
  TempDir dir;
  Simulate(dir, "first", "stop@rank=1");
  Simulate(dir, "second", "");
  ProgramResult r = Cli({"analyze", dir.path()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("files of 2 jobs"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("job first"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("job second"), std::string::npos) << r.err;
}

TEST(Cli, ARankWithTwoFilesIsSaidWithTheVerdictNotAfterTheStacks) {
  TempDir dir;
  Simulate(dir, "dup", "stop@rank=1");
  const std::vector<std::string> files = testing::ListTraceFiles(dir.path() + "/dup");
  ASSERT_FALSE(files.empty());
  std::filesystem::copy_file(files[0], dir.path() + "/dup/zz-copy.htrace");
  ProgramResult r = Cli({"analyze", dir.path() + "/dup"});
  const size_t note = r.out.find("note: rank ");
  ASSERT_NE(note, std::string::npos) << r.out;
  EXPECT_NE(r.out.find("has two trace files", note), std::string::npos) << r.out;
  EXPECT_LT(note, r.out.find("classes (biggest first)")) << r.out;
}

TEST(Cli, AnalyzeWithoutAPathTakesTheOnlyJobOrAsksWhich) {
  TempDir dir;
  Simulate(dir, "only", "stop@rank=1");
  ProgramResult r = Cli({"analyze"}, {{"HANGTRACE_DIR", dir.path()}});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_EQ(r.out.rfind("hangtrace: HANG", 0), 0u) << r.out;
  EXPECT_NE(r.err.find("the only job in"), std::string::npos) << r.err;
  Simulate(dir, "another", "");
  r = Cli({"analyze"}, {{"HANGTRACE_DIR", dir.path()}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("holds 2 jobs; name one"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hangtrace analyze " + dir.path() + "/only"), std::string::npos) << r.err;
}

TEST(Cli, LsListsJobsWithStateRanksAndPath) {
  TempDir dir;
  ProgramResult r = Cli({"ls", dir.path()});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("no traced job"), std::string::npos) << r.out;
  // A simulated job's processes are not on this machine's /proc: judged by
  // their heartbeats, long silent: gone.
  Simulate(dir, "sim", "stop@rank=1");
  // A live traced process: running, with its path.
  const pid_t child = StartLiveJob(dir);
  r = Cli({"ls", dir.path()});
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("JOB "), std::string::npos) << r.out;
  auto line_of = [&](const std::string& job) {
    size_t at = r.out.find("\n" + job + " ");
    return at == std::string::npos ? std::string() : r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
  };
  const std::string live = line_of("live"), sim = line_of("sim");
  EXPECT_NE(live.find(" running "), std::string::npos) << r.out;
  EXPECT_NE(live.find(dir.path() + "/live"), std::string::npos) << r.out;
  EXPECT_NE(sim.find(" gone "), std::string::npos) << r.out;
  EXPECT_NE(sim.find("0-3 of 4"), std::string::npos) << r.out;
  // And after the kill, the live one is gone too: killed without an exit.
  r = Cli({"ls", dir.path()});
  EXPECT_NE(line_of("live").find(" gone "), std::string::npos) << r.out;
}

// Another user's folder planted among ours (a job folder in the trace
// folder, a node folder in a shared dump folder) is skipped with its owner
// named: ls does not list it as ours, analyze does not read it.
TEST(Cli, FoldersAnotherUserPlantedAreSkippedWithTheirOwnerNamed) {
  TempDir dir;
  Simulate(dir, "mine", "");
  Simulate(dir, "planted", "stop@rank=1");
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path() + "/planted")) {
    ASSERT_EQ(lchown(e.path().c_str(), 65534, 65534), 0);
  }
  ASSERT_EQ(chown((dir.path() + "/planted").c_str(), 65534, 65534), 0);
  ProgramResult r = Cli({"ls", dir.path()});
  EXPECT_EQ(r.out.find("\nplanted "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nmine "), std::string::npos) << r.out;
  const std::string why = dir.path() + "/planted belongs to uid 65534, not to uid 0 (the owner of " + dir.path() + ")";
  EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
  // Analyze of the folder: the planted job is not a second job beside ours.
  r = Cli({"analyze", dir.path()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;  // "mine" has no hang
  EXPECT_NE(r.out.find(why), std::string::npos) << r.out;
}

TEST(Cli, CleanRemovesEndedJobsAndNeverALiveOne) {
  TempDir dir;
  Simulate(dir, "ended", "");
  const pid_t child = StartLiveJob(dir);
  ProgramResult dry = Cli({"clean", "-n", dir.path()});
  EXPECT_NE(dry.out.find("would remove " + dir.path() + "/ended"), std::string::npos) << dry.out;
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/ended"));
  ProgramResult r = Cli({"clean", dir.path(), "--job", "live"});
  EXPECT_EQ(r.exit_code, 1) << "asked to remove a live job";
  EXPECT_NE(r.err.find("kept live"), std::string::npos) << r.err;
  r = Cli({"clean", dir.path()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("1 job(s) and 0 report folder(s) removed"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/ended"));
  EXPECT_EQ(testing::ListTraceFiles(dir.path() + "/live").size(), 1u) << "the live job's file stays";
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  r = Cli({"clean", dir.path()});
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/live"));
}

// The automatic report's folders pile up in launch folders (181 in one git
// checkout over a day of hung test jobs): ls lists them, clean removes
// those of ended jobs. A job folder holding only hangtrace's bookkeeping (a
// pending round, a helper's log) is a job to clean too.
TEST(Cli, LsAndCleanKnowTheReportFolders) {
  TempDir dir, launch;
  namespace fs = std::filesystem;
  auto make_report = [](const std::string& path) {
    fs::create_directories(path + "/run/round-20261127-120000/second");
    std::ofstream(path + "/run/round-20261127-120000/report.txt") << "hangtrace: HANG\n";
  };
  Simulate(dir, "ended", "");
  const std::string recorded = launch.path() + "/hangtrace-report-ended";
  make_report(recorded);
  std::ofstream(dir.path() + "/ended/report.where") << recorded << "\n";
  // Found in the launch folder, of jobs this machine knows nothing of (they
  // may still run on other nodes): kept unless named, old or not.
  const std::string old_one = launch.path() + "/hangtrace-report-elsewhere";
  const std::string fresh = launch.path() + "/hangtrace-report-fresh";
  make_report(old_one);
  make_report(fresh);
  const auto two_hours_ago = fs::file_time_type::clock::now() - std::chrono::hours(2);
  for (const auto& e : fs::recursive_directory_iterator(old_one)) fs::last_write_time(e.path(), two_hours_ago);
  fs::last_write_time(old_one, two_hours_ago);
  // A folder renamed to look like a report folder (another user may rename
  // entries of a folder they can write in): not a report folder.
  const std::string renamed = launch.path() + "/hangtrace-report-results";
  fs::create_directories(renamed + "/sub");
  std::ofstream(renamed + "/data.txt") << "results\n";
  std::ofstream(renamed + "/sub/more.txt") << "more\n";
  for (const auto& e : fs::recursive_directory_iterator(renamed)) fs::last_write_time(e.path(), two_hours_ago);
  // A job folder with bookkeeping only: a round file and a helper's log.
  fs::create_directories(dir.path() + "/leftover");
  std::ofstream(dir.path() + "/leftover/report.round.run") << "4242\n";
  std::ofstream(dir.path() + "/leftover/report.log.4242") << "";

  ProgramResult ls = Cli({"ls", dir.path(), "--reports", launch.path()});
  EXPECT_NE(ls.out.find("report folders"), std::string::npos) << ls.out;
  for (const std::string& p : {recorded, old_one, fresh}) EXPECT_NE(ls.out.find(p), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("\nleftover "), std::string::npos) << ls.out;

  ProgramResult r = Cli({"clean", dir.path(), "--reports", launch.path()});
  EXPECT_FALSE(fs::exists(recorded)) << r.out;
  EXPECT_TRUE(fs::exists(old_one)) << "a report folder of a job that may still run elsewhere was removed";
  EXPECT_TRUE(fs::exists(fresh)) << "a report folder of a job that may still run elsewhere was removed";
  EXPECT_TRUE(fs::exists(renamed + "/data.txt")) << "a folder that only looks like a report folder was removed";
  EXPECT_FALSE(fs::exists(dir.path() + "/leftover")) << r.out;
  EXPECT_NE(r.out.find("2 job(s) and 1 report folder(s) removed"), std::string::npos) << r.out;  // ended, leftover
  // Named, the unknown jobs' folders go; repeated options are taken whole.
  r = Cli({"clean", dir.path(), "--reports", launch.path(), "--reports", dir.path(), "--job", "elsewhere", "--job",
           "results"});
  EXPECT_FALSE(fs::exists(old_one)) << r.out << r.err;
  EXPECT_TRUE(fs::exists(renamed + "/data.txt"));
  EXPECT_NE(r.err.find("holds more than the automatic report writes"), std::string::npos) << r.err;
}

// The report's helper ends when asked, whatever the job ignored (an
// ignored SIGTERM stays ignored across exec).
TEST(Cli, TheReportHelperEndsOnSigtermEvenWhenTheJobIgnoresIt) {
  TempDir dir, out;
  const std::string cmd = "trap '' TERM; exec " + std::string(HT_CLI) + " auto-report --dir " + dir.path() +
                          " --job job --out " + out.path() + "/reports --settle 60";
  testing::Started helper({"/bin/sh", "-c", cmd}, {});
  usleep(500 * 1000);  // in its 60 s between the looks
  ASSERT_EQ(kill(helper.pid(), SIGTERM), 0);
  EXPECT_EQ(helper.Wait(5), -1);  // killed by a signal, or still running after 5 s:
  EXPECT_LT(helper.pid(), 0) << "it did not end on SIGTERM within 5 s";
}

TEST(Cli, TheVerdictIsInColourOnATerminalOnly) {
  TempDir dir;
  Simulate(dir, "hung", "stop@rank=1");
  const std::string analyze = std::string(HT_CLI) + " analyze " + dir.path() + "/hung";
  // script(1) gives the command a terminal.
  ProgramResult tty = RunProgram({"script", "-qec", analyze, "/dev/null"}, {{"NO_COLOR", ""}}, 60);
  EXPECT_NE(tty.out.find("hangtrace: \033[1;31mHANG\033[0m:"), std::string::npos) << tty.out;
  EXPECT_NE(tty.out.find("\033[1mculprit rank 1"), std::string::npos) << tty.out;
  ProgramResult no_color = RunProgram({"script", "-qec", analyze, "/dev/null"}, {{"NO_COLOR", "1"}}, 60);
  EXPECT_EQ(no_color.out.find('\033'), std::string::npos) << no_color.out;
  EXPECT_NE(no_color.out.find("hangtrace: HANG:"), std::string::npos) << no_color.out;
  ProgramResult piped = Cli({"analyze", dir.path() + "/hung"});
  EXPECT_EQ(piped.out.find('\033'), std::string::npos);
}

TEST(Cli, RunTakesTheCommandsOwnOptionsAsItsOwn) {
  ProgramResult r = Cli({"run", "echo", "hello", "--timeout", "3", "world"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "hello --timeout 3 world\n");
  r = Cli({"run", "--timeout", "3", "--", "echo", "a", "--", "b"});
  EXPECT_EQ(r.out, "a -- b\n");
  r = Cli({"run", "ls", "-d", "/tmp"});
  EXPECT_EQ(r.out, "/tmp\n");
  r = Cli({"run", "--timeuot", "3", "echo"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown option '--timeuot'"), std::string::npos) << r.err;
  r = Cli({"run"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no command given"), std::string::npos) << r.err;
}

TEST(Cli, AMisspeltCommandGetsADidYouMean) {
  ProgramResult r = Cli({"analyse", "x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("did you mean 'analyze'?"), std::string::npos) << r.err;
  r = Cli({"srundump"});
  EXPECT_NE(r.err.find("did you mean 'srun-dump'?"), std::string::npos) << r.err;
  r = Cli({"frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err.find("did you mean"), std::string::npos) << r.err;
  // Options too.
  r = Cli({"analyze", "--formt", "json", "x"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("did you mean --format (for --formt)?"), std::string::npos) << r.err;
  r = Cli({"dump", "--no-stack"});
  EXPECT_NE(r.err.find("did you mean --no-stacks"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace hangtrace
