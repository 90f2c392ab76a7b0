// The runtime as users get it: libhangtrace.so preloaded into a separate
// program (tests/progs/traced_prog.c), whose trace file is then read.
#include <gtest/gtest.h>
#include <pwd.h>
#include <iterator>
#include <sys/mount.h>
#include <unistd.h>
#include <filesystem>
#include <sys/stat.h>
#include <sys/wait.h>

#include <map>
#include <signal.h>

#include <algorithm>
#include <fstream>

#include "merger/trace_reader.h"
#include "merger/symbolize.h"
#include "tests/test_util.h"
#include "tracer/config.h"

namespace hangtrace {
namespace {

using testing::CountKind;
using testing::ListTraceFiles;
using testing::ProgramResult;
using testing::RunProgram;
using testing::TempDir;

ProgramResult RunTraced(const TempDir& dir, std::vector<std::string> args,
                        std::vector<std::pair<std::string, std::string>> env = {}, double timeout_s = 30) {
  args.insert(args.begin(), HT_PROG);
  env.push_back({"LD_PRELOAD", HT_PRELOAD});
  env.push_back({"HANGTRACE_DIR", dir.path()});
  env.push_back({"HANGTRACE_JOB", "job"});
  // The automatic report only where a test asks for it (it would start
  // build/bin/hangtrace and write into the current folder).
  bool report = false;
  for (const auto& [k, v] : env) report |= k == "HANGTRACE_REPORT";
  if (!report) env.push_back({"HANGTRACE_REPORT", "0"});
  return RunProgram(args, env, timeout_s);
}

TraceSnapshot ReadOnly(const TempDir& dir) {
  std::vector<std::string> files = ListTraceFiles(dir.path());
  EXPECT_EQ(files.size(), 1u);
  std::string err;
  auto s = files.empty() ? std::nullopt : ReadTraceFile(files[0], &err);
  EXPECT_TRUE(s) << err;
  return s ? *s : TraceSnapshot{};
}

// The stacks the process captured, named as the analyzer names them (the
// runtime keeps program counters; libdw names them from the files).
std::map<uint32_t, std::vector<Frame>> Named(const TraceSnapshot& s) {
  Symbolizer symbols;
  std::map<uint32_t, std::vector<Frame>> out;
  for (auto& [tid, frames] : SnapshotStacks(s, &symbols)) out[tid] = frames;
  return out;
}

bool StackHas(const std::vector<Frame>& frames, const std::string& func) {
  for (const Frame& f : frames) {
    if (f.func == func) return true;
  }
  return false;
}

// Another Unix user than the one running the tests (nobody).
constexpr uid_t kOtherUser = 65534;

struct FolderCase {
  const char* what;
  std::string expect;  // in the one stderr line; "" when it must trace
};

TEST(Runtime, TraceFoldersOthersCouldRedirectAreRefused) {
  // The default folder is /dev/shm/hangtrace-<user>, in a folder everyone
  // may write: another user can create it first, or plant a link there.
  // The program runs as nobody (the folder's name is the real uid's, never
  // $USER), and root plays the other user.
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to run as another user and plant files";
  const passwd* pw = getpwuid(kOtherUser);
  ASSERT_NE(pw, nullptr);
  const std::string home = std::string("/dev/shm/hangtrace-") + pw->pw_name;
  TempDir elsewhere;  // a folder the planting user (root) owns, open to all
  chmod(elsewhere.path().c_str(), 0777);
  auto run = [&](const char* what) {
    ProgramResult r = RunProgram({"runuser", "-u", pw->pw_name, "--", HT_PROG, "events", "3"},
                                 {{"LD_PRELOAD", HT_PRELOAD}, {"USER", "root"}, {"HANGTRACE_JOB", "job"}});
    EXPECT_EQ(r.exit_code, 0) << what << ": the program must run as untraced: " << r.err;
    return r;
  };
  auto reset = [&] {
    unlink(home.c_str());
    std::filesystem::remove_all(home);
  };
  // 1. A link planted in its name.
  reset();
  ASSERT_EQ(symlink(elsewhere.path().c_str(), home.c_str()), 0);
  ProgramResult r = run("link");
  EXPECT_NE(r.err.find(home + " is not a folder of its own"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("traced=0"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::is_empty(elsewhere.path())) << "a file went through the planted link";
  // 2. A real folder, created by the other user.
  reset();
  ASSERT_EQ(mkdir(home.c_str(), 0777), 0);
  chmod(home.c_str(), 0777);
  r = run("theirs");
  EXPECT_NE(r.err.find("belongs to uid 0"), std::string::npos) << r.err;
  // 3. Its own, but open to others.
  reset();
  ASSERT_EQ(mkdir(home.c_str(), 0700), 0);
  ASSERT_EQ(chown(home.c_str(), kOtherUser, kOtherUser), 0);
  chmod(home.c_str(), 0777);
  r = run("open");
  EXPECT_NE(r.err.find("has mode 777"), std::string::npos) << r.err;
  // 4. None yet: made 0700, the job's folder 0700, the file 0600; the real
  // uid's, though $USER names root.
  reset();
  r = run("fresh");
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("traced=1"), std::string::npos) << r.out;
  struct stat st;
  ASSERT_EQ(lstat(home.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_uid, kOtherUser);
  ASSERT_EQ(lstat((home + "/job").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto files = ListTraceFiles(home);
  ASSERT_EQ(files.size(), 1u);
  ASSERT_EQ(lstat(files[0].c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // 5. A link planted as the job's folder, inside its own (its own again).
  std::filesystem::remove_all(home + "/job");
  ASSERT_EQ(symlink(elsewhere.path().c_str(), (home + "/job").c_str()), 0);
  lchown((home + "/job").c_str(), kOtherUser, kOtherUser);
  r = run("job link");
  EXPECT_NE(r.err.find("/job is not a folder of its own"), std::string::npos) << r.err;
  EXPECT_TRUE(std::filesystem::is_empty(elsewhere.path()));
  reset();
}

TEST(Runtime, ANamedTraceFolderOthersMayWriteIsRefused) {
  TempDir dir;
  chmod(dir.path().c_str(), 0777);
  ProgramResult r = RunTraced(dir, {"events", "3"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.err.find("others may write in it"), std::string::npos) << r.err;
  chmod(dir.path().c_str(), 0755);  // a named folder may be readable: the job's folder below is 0700
  r = RunTraced(dir, {"events", "3"});
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(ListTraceFiles(dir.path()).size(), 1u);
}

TEST(Runtime, DlsymRtldNextIsAnsweredForTheCaller) {
  // libhangtrace.so wraps dlsym (for cuGetProcAddress); RTLD_NEXT asked
  // through it must still mean "after the caller", not "after hangtrace".
  TempDir dir;
  ProgramResult r = RunTraced(dir, {"dlnext"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST(Runtime, ALongLabelTakesOneCallTableEntryHoweverOftenItIsUsed) {
  // A label longer than the call table keeps is stored cut; it must match
  // itself the next time, or each mark takes a new entry until the table
  // is full (it compared 40 bytes of a name stored in at most 39).
  TempDir dir;
  ProgramResult r = RunTraced(dir, {"labels", "50"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  TraceSnapshot s = ReadOnly(dir);
  size_t entries = 0;
  for (const CallDesc& c : s.calls) entries += c.name.rfind("a_label_longer_than", 0) == 0;
  EXPECT_EQ(entries, 1u);  // a name is one entry, marked or entered
  EXPECT_EQ(CountKind(s, fmt::EventKind::kMark), 50u);
}

TEST(Runtime, AFileCutShortKeepsTheLanesThatAreWhole) {
  // A file cut in its ring (a full disk, a copy that stopped) keeps the
  // records of the lanes before the cut; the section was dropped whole.
  TempDir dir;
  ProgramResult r = RunTraced(dir, {"events", "100"}, {{"HANGTRACE_KEEP", "1"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> files = ListTraceFiles(dir.path());
  ASSERT_EQ(files.size(), 1u);
  struct stat st;
  ASSERT_EQ(stat(files[0].c_str(), &st), 0);
  ASSERT_EQ(truncate(files[0].c_str(), st.st_size - 4096), 0);
  std::string err;
  auto s = ReadTraceFile(files[0], &err);
  ASSERT_TRUE(s) << err;
  EXPECT_EQ(CountKind(*s, fmt::EventKind::kBegin, "test_call"), 100u);
  bool said = false;
  for (const std::string& w : s->warnings) said |= w.find("event ring cut short") != std::string::npos;
  EXPECT_TRUE(said);
}

// The storage fills while the program runs: a thread started then cannot
// have its lane. The program is unharmed, and the file says what was lost
// (before, inspect said "tables full" and nothing else did). A private
// tmpfs needs a mount namespace: skipped where there is none.
TEST(Runtime, AThreadTheFullStorageLeftUntracedIsCountedAndSaid) {
  TempDir dir, out;
  const std::string traces = dir.path() + "/traces";
  const std::string script =
      "mkdir -p " + traces + " && mount -t tmpfs -o size=8m,mode=700 tmpfs " + traces + " || exit 77\n"
      "HANGTRACE_DIR=" + traces + " HANGTRACE_JOB=job LD_PRELOAD=" + HT_PRELOAD + " " + HT_PROG + " late-thread " +
      traces + "/go > /dev/null &\n"
      "for i in $(seq 300); do ls " + traces + "/job/*.htrace >/dev/null 2>&1 && break; sleep 0.01; done\n"
      "dd if=/dev/zero of=" + traces + "/fill bs=64k 2>/dev/null\n"
      "touch " + traces + "/go\n"
      "wait $!; echo $? > " + out.path() + "/status\n" + HT_CLI + " inspect " + traces + "/job/*.htrace > " +
      out.path() + "/inspect 2>&1\n";
  ProgramResult r = RunProgram({"unshare", "--mount", "--propagation", "private", "sh", "-c", script}, {}, 60);
  if (r.exit_code == 77 || (r.exit_code != 0 && r.err.find("unshare failed") != std::string::npos)) {
    GTEST_SKIP() << "no private tmpfs here: " << r.err;
  }
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::ReadFileText(out.path() + "/status"), "0\n");
  const std::string inspect = testing::ReadFileText(out.path() + "/inspect");
  EXPECT_NE(inspect.find("untraced 1 thread(s): no room in the trace folder for their record lanes"), std::string::npos)
      << inspect;
  EXPECT_EQ(inspect.find("tables full"), std::string::npos) << inspect;
}

TEST(Runtime, ARustProgramsStackOverflowMessageSurvivesTracing) {
  // Rust installs its SIGSEGV handler only where the default one is; the
  // runtime's own stands in for the default, and must read as the default.
  if (std::string(HT_RUST_OVERFLOW).empty()) GTEST_SKIP() << "rustc is not installed";
  TempDir dir;
  ProgramResult untraced = RunProgram({HT_RUST_OVERFLOW}, {}, 30);
  ProgramResult traced = RunProgram({HT_RUST_OVERFLOW}, {{"LD_PRELOAD", HT_PRELOAD}, {"HANGTRACE_DIR", dir.path()},
                                                         {"HANGTRACE_JOB", "job"}}, 30);
  EXPECT_EQ(untraced.term_signal, SIGABRT) << untraced.err;
  EXPECT_EQ(traced.term_signal, untraced.term_signal) << traced.err;
  EXPECT_NE(untraced.err.find("has overflowed its stack"), std::string::npos) << untraced.err;
  EXPECT_NE(traced.err.find("has overflowed its stack"), std::string::npos) << traced.err;
}

TEST(Runtime, NormalExitIsRecordedWithItsCode) {
  TempDir dir;
  ProgramResult r = RunTraced(dir, {"exit", "3"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.out.find("traced=1"), std::string::npos);
  TraceSnapshot s = ReadOnly(dir);
  EXPECT_EQ(fmt::ProcState(s.process.state), fmt::ProcState::kExited);
  EXPECT_EQ(s.process.exit_code, 3);
  EXPECT_EQ(CountKind(s, fmt::EventKind::kBegin, "test_call"), 2u);
  EXPECT_EQ(CountKind(s, fmt::EventKind::kEnd, "test_call"), 2u);
  EXPECT_STREQ(s.process.job, "job");
  EXPECT_GT(s.process.clock.ticks_hz, 0u);
}

TEST(Runtime, CrashDurabilityAfterSigkill) {
  TempDir dir;
  ProgramResult r = RunTraced(dir, {"kill", "500"});
  EXPECT_EQ(r.term_signal, SIGKILL);
  TraceSnapshot s = ReadOnly(dir);
  // Every committed event is there, and the call it died in is visible.
  EXPECT_EQ(CountKind(s, fmt::EventKind::kBegin, "test_call"), 501u);
  EXPECT_EQ(CountKind(s, fmt::EventKind::kEnd, "test_call"), 500u);
  EXPECT_EQ(s.events_rejected, 0u);
  EXPECT_EQ(fmt::ProcState(s.process.state), fmt::ProcState::kRunning);  // no exit record
  bool in_call = false;
  for (const ThreadInfo& t : s.threads) {
    if (t.in_call && t.current.count == 4242 && s.CallName(t.current.call) == "test_call") in_call = true;
  }
  EXPECT_TRUE(in_call) << "the in-flight call must be readable after SIGKILL";
}

TEST(Runtime, ForkChildGetsItsOwnFile) {
  TempDir dir;
  ProgramResult r = RunTraced(dir, {"fork"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> files = ListTraceFiles(dir.path());
  ASSERT_EQ(files.size(), 2u);
  int parents = 0, children = 0;
  for (const std::string& f : files) {
    std::string err;
    auto s = ReadTraceFile(f, &err);
    ASSERT_TRUE(s) << err;
    if (s->process.forked) {
      ++children;
      EXPECT_EQ(CountKind(*s, fmt::EventKind::kBegin, "child_call"), 7u);
      EXPECT_EQ(CountKind(*s, fmt::EventKind::kBegin, "test_call"), 0u);
      EXPECT_EQ(fmt::RankSource(s->process.rank_source), fmt::RankSource::kInherited);
      EXPECT_GT(s->process.parent_pid, 0);
    } else {
      ++parents;
      EXPECT_EQ(CountKind(*s, fmt::EventKind::kBegin, "test_call"), 10u);
      EXPECT_EQ(CountKind(*s, fmt::EventKind::kBegin, "child_call"), 0u);
      EXPECT_EQ(fmt::ProcState(s->process.state), fmt::ProcState::kExited);
    }
  }
  EXPECT_EQ(parents, 1);
  EXPECT_EQ(children, 1);
}

// A fork inside a traced call: the child's END of that call reaches neither
// its parent's file (the child unmaps it) nor its own, and the child then
// traces into a file of its own; the parent's call ends once, in its file.
TEST(Runtime, AForkInsideACallEndsItInTheParentOnly) {
  TempDir dir;
  ProgramResult r = RunTraced(dir, {"fork-in-call"});
  ASSERT_EQ(r.exit_code, 0) << r.err;  // the child crashed writing its END: exit 1
  std::vector<std::string> files = ListTraceFiles(dir.path());
  ASSERT_EQ(files.size(), 2u);
  for (const std::string& f : files) {
    std::string err;
    auto s = ReadTraceFile(f, &err);
    ASSERT_TRUE(s) << err;
    EXPECT_EQ(s->events_rejected, 0u) << f;
    if (s->process.forked) {
      EXPECT_EQ(CountKind(*s, fmt::EventKind::kBegin, "child_call"), 4u);
      EXPECT_EQ(CountKind(*s, fmt::EventKind::kEnd, "child_call"), 4u);
      EXPECT_EQ(CountKind(*s, fmt::EventKind::kEnd, "test_call"), 0u);
    } else {
      EXPECT_EQ(CountKind(*s, fmt::EventKind::kBegin, "test_call"), 4u);
      EXPECT_EQ(CountKind(*s, fmt::EventKind::kEnd, "test_call"), 4u);
      for (const ThreadInfo& t : s->threads) EXPECT_FALSE(t.in_call);
    }
  }
}

TEST(Runtime, ExecMarksThePreviousImage) {
  TempDir dir;
  ProgramResult r = RunTraced(dir, {"exec"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> files = ListTraceFiles(dir.path());
  ASSERT_EQ(files.size(), 2u);
  int execed = 0, exited = 0;
  for (const std::string& f : files) {
    std::string err;
    auto s = ReadTraceFile(f, &err);
    ASSERT_TRUE(s) << err;
    if (fmt::ProcState(s->process.state) == fmt::ProcState::kExeced) {
      ++execed;
      EXPECT_EQ(CountKind(*s, fmt::EventKind::kBegin, "test_call"), 1u);
    } else {
      ++exited;
      EXPECT_EQ(CountKind(*s, fmt::EventKind::kBegin, "test_call"), 3u);
    }
  }
  EXPECT_EQ(execed, 1);
  EXPECT_EQ(exited, 1);
}

TEST(Runtime, UnwritableDirectoryFailsOpen) {
  // A folder below a regular file can never be created, even by root.
  TempDir dir;
  std::string file = dir.path() + "/plain-file";
  FILE* f = fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  ProgramResult r = RunProgram({HT_PROG, "events", "5"},
                               {{"LD_PRELOAD", HT_PRELOAD}, {"HANGTRACE_DIR", file + "/traces"}});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("traced=0"), std::string::npos) << r.out;
  // Exactly one line, naming the problem.
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("hangtrace: not tracing"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("plain-file"), std::string::npos) << r.err;
}

TEST(Runtime, AMallocInterposerThatUsesDlsymRtldNextStillWorks) {
  // Its malloc resolves the real one with dlsym(RTLD_NEXT); the exported
  // dlsym allocated on that path, and the two recursed to SIGSEGV.
  for (const char* off : {"0", "1"}) {
    for (bool ours_first : {true, false}) {
      TempDir dir;
      std::string preload = ours_first ? std::string(HT_PRELOAD) + ":" + HT_MALLOC_INTERPOSER
                                       : std::string(HT_MALLOC_INTERPOSER) + ":" + HT_PRELOAD;
      ProgramResult r = RunProgram({HT_PROG, "events", "3"},
                                   {{"LD_PRELOAD", preload}, {"HANGTRACE_DIR", dir.path()}, {"HANGTRACE_OFF", off}}, 20);
      EXPECT_EQ(r.exit_code, 0) << preload << " HANGTRACE_OFF=" << off << ": " << r.err;
    }
  }
}

TEST(Runtime, AProgramWithoutMpiThatProbesForItFindsNone) {
  TempDir dir;
  ProgramResult plain = RunProgram({HT_PROG, "probe-mpi"}, {}, 20);
  ProgramResult traced = RunTraced(dir, {"probe-mpi"});
  // The first line says whether the tracer is in; the probe's line follows.
  EXPECT_NE(plain.out.find("\nMPI_Init=absent\n"), std::string::npos) << plain.out;
  EXPECT_NE(traced.out.find("traced=1\n"), std::string::npos) << traced.out;
  EXPECT_NE(traced.out.find("\nMPI_Init=absent\n"), std::string::npos)
      << "our MPI wrappers must not pass for an MPI library: " << traced.out;
}

TEST(Runtime, OffMeansNoFileAndNoTracing) {
  TempDir dir;
  ProgramResult r = RunTraced(dir, {"events", "5"}, {{"HANGTRACE_OFF", "1"}});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("traced=0"), std::string::npos);
  EXPECT_TRUE(ListTraceFiles(dir.path()).empty());
  EXPECT_EQ(r.err, "");
}

TEST(Runtime, WatchdogFlagsTheCallAndItsStackNamesTheBlockedFunction) {
  TempDir dir;
  // Without the automatic report: the watchdog's own line.
  ProgramResult r = RunTraced(dir, {"hold"}, {{"HANGTRACE_TIMEOUT", "0.5"}, {"HANGTRACE_REPORT", "0"}}, /*timeout_s=*/2.0);
  EXPECT_EQ(r.term_signal, SIGKILL);  // it hangs until we kill it
  // One stderr line naming the call.
  EXPECT_NE(r.err.find("hangtrace: watchdog:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("test_call"), std::string::npos) << r.err;
  TraceSnapshot s = ReadOnly(dir);
  EXPECT_GE(s.process.watchdog_fires, 1u);
  EXPECT_EQ(CountKind(s, fmt::EventKind::kWatchdog, "test_call"), 1u);
  bool flagged = false;
  for (const ThreadInfo& t : s.threads) flagged |= t.in_call && t.watchdog_flagged && t.current.count == 7;
  EXPECT_TRUE(flagged);
  bool named = false;
  const auto frames = Named(s);
  for (const StackInfo& st : s.stacks) {
    EXPECT_EQ(st.reason, fmt::StackReason::kWatchdog);
    if (st.status == fmt::StackStatus::kDone && StackHas(frames.at(st.tid), "stuck_in_here") &&
        StackHas(frames.at(st.tid), "main")) {
      named = true;
    }
  }
  EXPECT_TRUE(named) << "no captured stack names stuck_in_here";
  // The module map of the round is in the file: the program is in it.
  bool program = false;
  for (const ModuleInfo& m : s.modules) program |= m.path == HT_PROG;
  EXPECT_TRUE(program) << "the module map lacks " << HT_PROG;
}

// The automatic report's part in the process: on the watchdog's firing, one
// `HANGTRACE_CLI auto-report ...` started (here a script that notes how it
// was called), with the job's trace folder and the report folder, in an
// environment that neither traces it nor makes it look like a rank; and no
// watchdog line of the process's own.
TEST(Runtime, TheWatchdogStartsTheAutomaticReportOnceAndPrintsNoLineOfItsOwn) {
  TempDir dir, report;
  const std::string cli = report.path() + "/fake-hangtrace.sh", calls = report.path() + "/calls";
  {
    std::ofstream o(cli);
    o << "#!/bin/sh\n{ echo \"$*\"; env | grep -c -e LD_PRELOAD -e OMPI_COMM_WORLD_RANK; } >> " << calls << "\n";
  }
  chmod(cli.c_str(), 0755);
  ProgramResult r = RunTraced(dir, {"hold"},
                              {{"HANGTRACE_TIMEOUT", "0.3"}, {"HANGTRACE_REPORT", "1"}, {"HANGTRACE_CLI", cli},
                               {"HANGTRACE_REPORT_DIR", report.path() + "/out"}, {"OMPI_COMM_WORLD_RANK", "0"}},
                              /*timeout_s=*/2.0);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_EQ(r.err.find("hangtrace: watchdog:"), std::string::npos) << r.err;
  std::ifstream in(calls);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 2u) << "the helper was not started exactly once";
  EXPECT_EQ(lines[0].rfind("auto-report --dir " + dir.path() + " --job job --run ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(" --out " + report.path() + "/out --timeout 0.3 --log " + dir.path() + "/job/report.log."),
            std::string::npos) << lines[0];
  EXPECT_EQ(lines[1], "0") << "the helper inherited LD_PRELOAD or a rank";
  TraceSnapshot s = ReadOnly(dir);
  EXPECT_GE(s.process.watchdog_fires, 1u);
}

// The automatic report with the real helper, into `report_dir`, of a
// process stuck in a call (traced_prog hold) killed after `seconds`.
ProgramResult RunWithReport(const TempDir& dir, const std::string& report_dir, double seconds,
                            std::vector<std::pair<std::string, std::string>> env = {},
                            std::vector<std::string> args = {"hold"}) {
  // A rank (the automatic report is a job's; a process without a rank says
  // its watchdog lines).
  // The caller's settings come after (they win).
  env.insert(env.begin(), {{"HANGTRACE_TIMEOUT", "0.3"}, {"HANGTRACE_REPORT", "1"}, {"HANGTRACE_CLI", HT_CLI},
                           {"HANGTRACE_REPORT_DIR", report_dir}, {"OMPI_COMM_WORLD_RANK", "0"},
                           {"OMPI_COMM_WORLD_SIZE", "1"}});
  return RunTraced(dir, args, env, seconds);
}

// Whether `path` (a folder) holds anything.
bool HoldsAnything(const std::string& path) {
  std::error_code ec;
  return std::filesystem::directory_iterator(path, ec) != std::filesystem::directory_iterator();
}

TEST(Runtime, AReportFolderOthersMayWriteInIsRefusedAndTheWatchdogLinesSayTheRest) {
  // A group or project folder, a shared scratch: others could plant links
  // or folders where the report goes. Refused, said in one line, and each
  // rank's watchdog line is printed instead of nothing.
  TempDir dir, shared;
  chmod(shared.path().c_str(), 0777);
  ProgramResult r = RunWithReport(dir, shared.path(), 2.0);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_NE(r.err.find("hangtrace: no automatic report: " + shared.path() + " has mode 777: other users may write"),
            std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hangtrace: watchdog: rank"), std::string::npos) << r.err;
  EXPECT_FALSE(HoldsAnything(shared.path())) << "something was written into the refused folder";
}

TEST(Runtime, WhatAnotherUserPlantedInAStickyReportFolderIsNeverFollowedNorBelieved) {
  // A sticky folder all may write in (like /tmp): allowed, since no one can
  // rename or remove what is ours there; but what another user made in it
  // is theirs: a folder under the run's name, or a link there to a folder
  // of ours elsewhere, is refused, and nothing is written through it.
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to plant files as another user";
  for (const char* plant : {"folder", "link"}) {
    TempDir dir, shared, victim;
    chmod(shared.path().c_str(), 01777);
    const std::string run = shared.path() + "/run";  // the run's name where no launcher names one
    if (std::string(plant) == "folder") {
      ASSERT_EQ(mkdir(run.c_str(), 0777), 0);
      ASSERT_EQ(chown(run.c_str(), kOtherUser, kOtherUser), 0);
    } else {
      ASSERT_EQ(symlink(victim.path().c_str(), run.c_str()), 0);
      ASSERT_EQ(lchown(run.c_str(), kOtherUser, kOtherUser), 0);
    }
    ProgramResult r = RunWithReport(dir, shared.path(), 3.0, {{"HANGTRACE_RUN", "run"}});
    EXPECT_NE(r.err.find("hangtrace: no automatic report: " + run), std::string::npos) << plant << ": " << r.err;
    EXPECT_NE(r.err.find("hangtrace: watchdog: rank"), std::string::npos) << plant << ": " << r.err;
    EXPECT_EQ(r.err.find("automatic report of job"), std::string::npos) << plant << ": " << r.err;
    EXPECT_FALSE(HoldsAnything(victim.path())) << plant << ": written through the planted link";
    if (std::string(plant) == "folder") {
      EXPECT_FALSE(HoldsAnything(run)) << "written into another user's folder";
    }
  }
}

TEST(Runtime, AFifoNamedLikeTheRoundsMarkerDoesNotHoldTheReport) {
  // Whatever sits under a file's name (here a FIFO where the round's marker
  // goes), reading it never blocks, and the report comes.
  TempDir dir, out;
  const std::string reports = out.path() + "/reports";
  ASSERT_EQ(mkdir(reports.c_str(), 0700), 0);
  ASSERT_EQ(mkdir((reports + "/run").c_str(), 0700), 0);
  ASSERT_EQ(mkfifo((reports + "/run/round.started").c_str(), 0600), 0);
  ProgramResult r = RunWithReport(dir, reports, 8.0);
  EXPECT_NE(r.err.find("hangtrace: automatic report of job job"), std::string::npos) << r.err;
}

TEST(Runtime, AReportFolderOnAFullOrReadOnlyFileSystemIsSaidAndTheWatchdogLinesFollow) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to mount a file system";
  for (const char* state : {"full", "read-only"}) {
    TempDir dir, mount_point;
    if (mount("tmpfs", mount_point.path().c_str(), "tmpfs", 0, "size=1m,mode=0700") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs: " << strerror(errno);
    }
    const std::string reports = mount_point.path() + "/reports";
    if (std::string(state) == "full") {
      std::ofstream fill(mount_point.path() + "/fill");
      const std::string block(4096, 'x');
      for (int i = 0; i < 512 && fill.good(); ++i) fill << block;
    } else {
      mkdir(reports.c_str(), 0700);
      mount(nullptr, mount_point.path().c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr);
    }
    ProgramResult r = RunWithReport(dir, reports, 2.0);
    umount2(mount_point.path().c_str(), MNT_DETACH);
    EXPECT_NE(r.err.find("hangtrace: no automatic report: "), std::string::npos) << state << ": " << r.err;
    EXPECT_NE(r.err.find(std::string(state) == "full" ? "is full" : "read-only"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("hangtrace: watchdog: rank"), std::string::npos) << state << ": " << r.err;
  }
}

TEST(Runtime, ALaunchFolderTheUserCannotWriteSendsTheReportToTheirOwnAndSaysWhere) {
  // The default report folder is in the folder the job was launched from;
  // one the user may not write in (here a read-only file system, which
  // stops root too) sends it to ~/.hangtrace, said in the job's log.
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to mount a file system";
  TempDir dir, launch, home;
  if (mount("tmpfs", launch.path().c_str(), "tmpfs", MS_RDONLY, "size=1m") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs: " << strerror(errno);
  }
  ProgramResult r = RunTraced(dir, {"hold"},
                              {{"HANGTRACE_TIMEOUT", "0.3"}, {"HANGTRACE_REPORT", "1"}, {"HANGTRACE_CLI", HT_CLI},
                               {"PWD", launch.path()}, {"HOME", home.path()}, {"OMPI_COMM_WORLD_RANK", "0"},
                               {"OMPI_COMM_WORLD_SIZE", "1"}},
                              8.0);
  umount2(launch.path().c_str(), MNT_DETACH);
  const std::string fallback = home.path() + "/.hangtrace/hangtrace-report-job";
  EXPECT_NE(r.err.find("the report goes to " + fallback), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hangtrace: automatic report of job job"), std::string::npos) << r.err;
  EXPECT_TRUE(HoldsAnything(fallback));
}

TEST(Runtime, ALinkAnotherUserPlantedOnTheWayToTheReportFolderIsNotFollowed) {
  // HANGTRACE_REPORT_DIR=/shared/proj/reports, where another user made
  // /shared/proj (a sticky folder all may write in) a link to a folder of
  // their choice: root's report went there. A link on the way is followed
  // only when it is root's or the user's own.
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to plant a link as another user";
  TempDir dir, shared, victim;
  chmod(shared.path().c_str(), 01777);
  chmod(victim.path().c_str(), 0777);
  const std::string proj = shared.path() + "/proj";
  ASSERT_EQ(symlink(victim.path().c_str(), proj.c_str()), 0);
  ASSERT_EQ(lchown(proj.c_str(), kOtherUser, kOtherUser), 0);
  ProgramResult r = RunWithReport(dir, proj + "/reports", 2.0);
  EXPECT_NE(r.err.find(proj + " is a link another user (uid 65534) made: not followed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hangtrace: watchdog: rank"), std::string::npos) << r.err;
  EXPECT_FALSE(HoldsAnything(victim.path())) << "the report went through the planted link";
}

TEST(Runtime, ARoundFileOfAKilledRunDoesNotSilenceTheNextHang) {
  // A killed run leaves its node's round file; a rerun under the same run
  // name (HANGTRACE_RUN reused) found it taken, and its hang got no report
  // and no line. A round whose holder is gone is taken over.
  TempDir dir, out;
  ASSERT_EQ(mkdir((dir.path() + "/job").c_str(), 0700), 0);
  std::ofstream(dir.path() + "/job/report.round.again") << "2147480000 1\n";  // no such process
  ProgramResult r = RunWithReport(dir, out.path() + "/reports", 8.0, {{"HANGTRACE_RUN", "again"}});
  EXPECT_NE(r.err.find("hangtrace: automatic report of job job"), std::string::npos) << r.err;
}

TEST(Runtime, AReportHelperThatIsKilledLeavesALineNotSilence) {
  // The helper ended by a signal (SIGTERM from the user, its deadline, a
  // fault) before it reported: the rank that started it says so.
  TempDir dir, out;
  const std::string cli = out.path() + "/dies.sh";
  std::ofstream(cli) << "#!/bin/sh\nkill -TERM $$\n";
  chmod(cli.c_str(), 0755);
  ProgramResult r = RunWithReport(dir, out.path() + "/reports", 3.0, {{"HANGTRACE_CLI", cli}});
  EXPECT_NE(r.err.find("its helper was ended by signal 15"), std::string::npos) << r.err;
}

TEST(Runtime, RunNamesCutOrMappedStayApart) {
  // A run's name becomes a folder's: cut at 63 characters and with '/' or
  // spaces mapped, two runs shared one name (64 y's then A, then B).
  std::string a, b, c, d;
  RunSetting::Parse((std::string(64, 'y') + "A").c_str(), &a);
  RunSetting::Parse((std::string(64, 'y') + "B").c_str(), &b);
  RunSetting::Parse("exp/1", &c);
  RunSetting::Parse("exp_1", &d);
  EXPECT_NE(a, b);
  EXPECT_NE(c, d);
  EXPECT_EQ(d, "exp_1") << "a name that needs no change keeps it";
  for (const std::string& n : {a, b, c}) {
    EXPECT_LE(n.size(), 63u) << n;
    EXPECT_EQ(n.find('/'), std::string::npos) << n;
  }
}

TEST(Runtime, NothingIsWrittenIntoADescriptorTheProgramReusedForItsStderr) {
  // The program closed fd 2 and opened a data file, which got the number:
  // neither the watchdog's lines nor the automatic report may land in it.
  for (const char* report : {"0", "1"}) {
    TempDir dir, out;
    const std::string data = out.path() + "/data.out";
    std::vector<std::pair<std::string, std::string>> env = {
        {"HANGTRACE_TIMEOUT", "0.3"}, {"HANGTRACE_REPORT", report}, {"HANGTRACE_CLI", HT_CLI},
        {"HANGTRACE_REPORT_DIR", out.path() + "/reports"}, {"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}};
    ProgramResult r = RunTraced(dir, {"reuse-stderr", data}, env, 6.0);
    EXPECT_EQ(r.term_signal, SIGKILL) << r.err;
    std::ifstream in(data);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(text, "data\n") << "HANGTRACE_REPORT=" << report;
    TraceSnapshot s = ReadOnly(dir);
    EXPECT_GE(s.process.watchdog_fires, 1u) << "the watchdog never fired: the check proves nothing";
  }
}

// A process that made traced calls and then sits in none past the timeout
// (blocked in a call hangtrace does not wrap, or computing): its stacks are
// captured once, quietly, so the analysis can tell which. A thread asleep
// is not signalled: its sleep() is not cut short.
TEST(Runtime, AProcessInNoTracedCallPastTheTimeoutHasItsStacksCapturedOnceQuietly) {
  TempDir dir;
  ProgramResult r = RunTraced(dir, {"idle"}, {{"HANGTRACE_TIMEOUT", "0.5"}}, /*timeout_s=*/2.5);
  EXPECT_EQ(r.term_signal, SIGKILL);
  EXPECT_EQ(r.err.find("hangtrace: watchdog:"), std::string::npos) << r.err;
  TraceSnapshot s = ReadOnly(dir);
  EXPECT_EQ(s.process.watchdog_fires, 0u);
  EXPECT_EQ(s.header.counters.stack_round, 1u) << "one capture for one stretch of silence";
  bool named = false;
  const auto frames = Named(s);
  for (const StackInfo& st : s.stacks) {
    EXPECT_EQ(st.reason, fmt::StackReason::kIdle);
    named |= st.status == fmt::StackStatus::kDone && StackHas(frames.at(st.tid), "waits_outside");
  }
  EXPECT_TRUE(named) << "no captured stack names waits_outside";
  EXPECT_NE(r.out.find("sleep left 0"), std::string::npos) << r.out;
}

TEST(Runtime, SegfaultIsRecordedWithTheFaultingStackThenKillsAsBefore) {
  TempDir dir;
  ProgramResult r = RunTraced(dir, {"segv", "4"});
  EXPECT_EQ(r.term_signal, SIGSEGV);  // the default action still happens
  TraceSnapshot s = ReadOnly(dir);
  EXPECT_EQ(fmt::ProcState(s.process.state), fmt::ProcState::kCrashed);
  EXPECT_EQ(s.process.signal, SIGSEGV);
  EXPECT_EQ(s.process.fault_addr, 0u);
  ASSERT_FALSE(s.stacks.empty());
  const StackInfo& st = s.stacks.back();
  EXPECT_EQ(st.reason, fmt::StackReason::kCrash);
  EXPECT_EQ(st.tid, uint32_t(s.process.signal_tid));
  const std::vector<Frame> frames = Named(s).at(st.tid);
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frames[0].func, "crash_here");  // the faulting pc itself
  EXPECT_TRUE(StackHas(frames, "main"));
  // And the call it crashed in.
  bool in_call = false;
  for (const ThreadInfo& t : s.threads) in_call |= t.in_call && t.current.count == 13;
  EXPECT_TRUE(in_call);
}

TEST(Runtime, AStackOverflowIsRecordedOnTheAlternateStack) {
  // Without an alternate signal stack the recorder cannot run on a thread
  // whose stack is full, and the crash went unrecorded.
  TempDir dir;
  ProgramResult r = RunTraced(dir, {"overflow"});
  EXPECT_EQ(r.term_signal, SIGSEGV);
  TraceSnapshot s = ReadOnly(dir);
  EXPECT_EQ(fmt::ProcState(s.process.state), fmt::ProcState::kCrashed);
  EXPECT_EQ(s.process.signal, SIGSEGV);
  ASSERT_FALSE(s.stacks.empty());
  const StackInfo& st = s.stacks.back();
  EXPECT_EQ(st.reason, fmt::StackReason::kCrash);
  const std::vector<Frame> frames = Named(s).at(st.tid);
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frames[0].func, "recurse_forever");
  bool in_call = false;
  for (const ThreadInfo& t : s.threads) in_call |= t.in_call && t.current.count == 21;
  EXPECT_TRUE(in_call);
}

TEST(Runtime, AThreadThatBlocksTheCaptureSignalIsNotLeftAPendingOne) {
  TempDir dir;
  ProgramResult r = RunTraced(dir, {"blocked"}, {{"HANGTRACE_TIMEOUT", "0.5"}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("pending=0"), std::string::npos) << r.out;
  TraceSnapshot s = ReadOnly(dir);
  int blocked = 0, done = 0;
  for (const StackInfo& st : s.stacks) {
    blocked += st.status == fmt::StackStatus::kBlocked;
    done += st.status == fmt::StackStatus::kDone;
  }
  EXPECT_EQ(blocked, 1);
  EXPECT_GE(done, 1);  // main, in its region
  // inspect times the capture by the threads that answered (the blocked
  // one's slot has no time: it printed "captured at -5030.610 s").
  ProgramResult inspect = RunProgram({HT_CLI, "inspect", dir.path()}, {});
  EXPECT_NE(inspect.out.find("captured at +"), std::string::npos) << inspect.out;
}

// Runs a shell command with the library preloaded into every process of it.
ProgramResult RunShellTraced(const TempDir& dir, const std::string& script,
                             std::vector<std::pair<std::string, std::string>> env = {}) {
  env.push_back({"LD_PRELOAD", HT_PRELOAD});
  env.push_back({"HANGTRACE_DIR", dir.path()});
  env.push_back({"HANGTRACE_JOB", "job"});
  return RunProgram({"/bin/sh", "-c", script}, env, 60);
}

TEST(Runtime, ASerialProgramOnAnMpiStubRunsAsUntraced) {
  // A program linked to an MPI stub (MPI_* defined, no PMPI_*: MUMPS's
  // libseq, PETSc's mpiuni) was aborted under the preload ("cannot find
  // PMPI_Init in any loaded MPI library; aborting"). Its calls now go to
  // its own functions, untraced, with one line on stderr at most; found
  // linked, by dlsym after hangtrace's first lookup, and before it.
  for (const char* mode : {"linked", "dlopen", "dlsym-first"}) {
    TempDir dir;
    ProgramResult untraced = RunProgram({HT_STUB_PROG, mode}, {}, 30);
    ProgramResult traced = RunProgram({HT_CLI, "run", "--dir", dir.path(), "--", HT_STUB_PROG, mode}, {}, 30);
    ASSERT_EQ(untraced.exit_code, 0) << untraced.err;
    EXPECT_NE(untraced.out.find("allreduce 0 -> 7 8 9"), std::string::npos) << untraced.out;
    EXPECT_EQ(traced.exit_code, 0) << mode << ": " << traced.err;
    EXPECT_EQ(traced.out, untraced.out) << mode;
    EXPECT_LE(std::count(traced.err.begin(), traced.err.end(), '\n'), 1) << mode << ": " << traced.err;
    if (!traced.err.empty()) {
      EXPECT_NE(traced.err.find("no PMPI_*"), std::string::npos) << traced.err;
    }
  }
}

TEST(Runtime, ProcessesWithoutATracedCallLeaveNothingBehind) {
  // 200 traced /bin/true, as a shell loop does: they filled a 64 MiB /dev/shm.
  TempDir dir;
  ProgramResult r = RunShellTraced(dir, "i=0; while [ $i -lt 200 ]; do /bin/true; i=$((i+1)); done");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(ListTraceFiles(dir.path()).empty());
  // A program with no traced call either (it registers a region, but never enters one).
  r = RunTraced(dir, {"probe-mpi"});
  EXPECT_NE(r.out.find("traced=1"), std::string::npos);
  EXPECT_TRUE(ListTraceFiles(dir.path()).empty());
  // The first traced call makes the file.
  r = RunTraced(dir, {"events", "1"});
  EXPECT_EQ(ListTraceFiles(dir.path()).size(), 1u);
}

TEST(Runtime, ARankHasItsFileFromTheStartAndKeepsItUnlessItExitedCleanWithNothingInIt) {
  TempDir dir;
  const std::pair<std::string, std::string> rank{"OMPI_COMM_WORLD_RANK", "0"};
  // Seen while it runs (a rank that hangs before MPI_Init is still found)...
  ProgramResult r = RunShellTraced(dir, "ls \"$HANGTRACE_DIR/job\"", {rank});
  EXPECT_NE(r.out.find(".htrace"), std::string::npos) << r.out << r.err;
  // ...and gone after a clean exit with nothing in it.
  EXPECT_TRUE(ListTraceFiles(dir.path()).empty());
  // A failed exit is kept, with its code.
  r = RunShellTraced(dir, "exit 3", {rank});
  EXPECT_EQ(r.exit_code, 3);
  TraceSnapshot s = ReadOnly(dir);
  EXPECT_EQ(s.process.exit_code, 3);
}

TEST(Runtime, AnUnprivilegedUserGetsItsFileNamedToo) {
  // Naming the anonymous file by AT_EMPTY_PATH takes CAP_DAC_READ_SEARCH;
  // another user goes through /proc/self/fd.
  TempDir dir;
  const std::string home = dir.path() + "/traces";
  ASSERT_EQ(mkdir(home.c_str(), 0700), 0);
  ASSERT_EQ(chown(home.c_str(), kOtherUser, kOtherUser), 0);
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);
  pid_t child = fork();
  if (child == 0) {
    if (setgid(kOtherUser) != 0 || setuid(kOtherUser) != 0) _exit(125);
    if (!freopen("/dev/null", "w", stdout)) _exit(126);
    setenv("LD_PRELOAD", HT_PRELOAD, 1);
    setenv("HANGTRACE_DIR", home.c_str(), 1);
    setenv("HANGTRACE_JOB", "job", 1);
    execl(HT_PROG, HT_PROG, "events", "3", (char*)nullptr);
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const std::vector<std::string> files = ListTraceFiles(home);
  ASSERT_EQ(files.size(), 1u);
  struct stat st;
  ASSERT_EQ(stat(files[0].c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kOtherUser);
  std::string err;
  auto s = ReadTraceFile(files[0], &err);
  ASSERT_TRUE(s) << err;
  EXPECT_EQ(s->process.exit_code, 0);
  EXPECT_EQ(CountKind(*s, fmt::EventKind::kBegin, "test_call"), 3u);
}

TEST(Runtime, KeepGivesEveryProcessItsFile) {
  TempDir dir;
  ProgramResult r = RunShellTraced(dir, "/bin/true; /bin/true", {{"HANGTRACE_KEEP", "1"}});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(ListTraceFiles(dir.path()).size(), 3u);  // sh and both /bin/true
}

// A rank makes its file at start; the processes it starts make theirs at
// their first traced call. The folder is unusable: the rank says why once,
// and its children, which call and fail too, say nothing more.
TEST(Runtime, WhyAJobIsNotTracedIsSaidOnceNotPerProcess) {
  TempDir dir;
  std::string file = dir.path() + "/plain-file";
  FILE* f = fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  const std::string prog = HT_PROG;
  ProgramResult r = RunProgram({"/bin/sh", "-c", prog + " events 1; " + prog + " events 1; " + prog + " events 1"},
                               {{"LD_PRELOAD", HT_PRELOAD}, {"HANGTRACE_DIR", file + "/traces"}, {"RANK", "0"},
                                {"WORLD_SIZE", "1"}});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("said once for this process and its children"), std::string::npos) << r.err;
}

// A process that is no rank and makes no traced call (a shell, a data
// loader, a compiler) neither makes a file nor says anything: the runtime
// starts at the first traced call, and there is none.
TEST(Runtime, AProcessThatMakesNoTracedCallStartsNothing) {
  TempDir dir;
  std::string file = dir.path() + "/plain-file";
  FILE* f = fopen(file.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  ProgramResult bad = RunProgram({"/bin/sh", "-c", "/bin/true; /bin/true"},
                                 {{"LD_PRELOAD", HT_PRELOAD}, {"HANGTRACE_DIR", file + "/traces"}});
  EXPECT_EQ(bad.exit_code, 0);
  EXPECT_EQ(bad.err, "");
  // With a usable folder: no job folder, no thread. The shell's own
  // threads are read while it runs (a sleep), from /proc.
  const std::string marker = dir.path() + "/threads";
  ProgramResult good = RunProgram({"/bin/sh", "-c", "ls /proc/$$/task | wc -l > " + marker + "; sleep 0.1"},
                                  {{"LD_PRELOAD", HT_PRELOAD}, {"HANGTRACE_DIR", dir.path() + "/traces"}});
  EXPECT_EQ(good.exit_code, 0) << good.err;
  std::ifstream in(marker);
  int threads = 0;
  in >> threads;
  EXPECT_EQ(threads, 1);
  struct stat st;
  EXPECT_NE(stat((dir.path() + "/traces").c_str(), &st), 0) << "the trace folder was made";
  // The same shell as a rank: its file and background thread at start.
  ProgramResult rank = RunProgram({"/bin/sh", "-c", "ls /proc/$$/task | wc -l > " + marker + "; sleep 0.1"},
                                  {{"LD_PRELOAD", HT_PRELOAD}, {"HANGTRACE_DIR", dir.path() + "/traces"},
                                   {"RANK", "0"}, {"WORLD_SIZE", "1"}});
  EXPECT_EQ(rank.exit_code, 0) << rank.err;
  std::ifstream again(marker);
  again >> threads;
  EXPECT_EQ(threads, 2);
}

// The process's first traced calls on eight threads at once: one file,
// every call recorded under its own name.
TEST(Runtime, FirstCallsOnManyThreadsAtOnceMakeOneFile) {
  for (int round = 0; round < 5; ++round) {
    TempDir dir;
    ProgramResult r = RunTraced(dir, {"first-calls", "8"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    TraceSnapshot s = ReadOnly(dir);
    EXPECT_EQ(CountKind(s, fmt::EventKind::kBegin, "thread_work"), 8u * 100);
    EXPECT_EQ(CountKind(s, fmt::EventKind::kEnd, "thread_work"), 8u * 100);
    EXPECT_EQ(s.events_rejected, 0u);
  }
}

TEST(Runtime, ManyThreadsEachGetALane) {
  TempDir dir;
  ProgramResult r = RunTraced(dir, {"threads", "16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  TraceSnapshot s = ReadOnly(dir);
  EXPECT_EQ(CountKind(s, fmt::EventKind::kBegin, "thread_work"), 16u * 1000);
  EXPECT_EQ(CountKind(s, fmt::EventKind::kEnd, "thread_work"), 16u * 1000);
  EXPECT_EQ(CountKind(s, fmt::EventKind::kBegin, "test_call"), 1000u);
  EXPECT_EQ(s.events_rejected, 0u);
}

// The thread a rank hangs on, when it is not the main one, is named in
// the analysis as inspect names it.
TEST(Runtime, AnalyzeNamesTheThreadOfAHungCall) {
  TempDir dir;
  RunTraced(dir, {"hold-thread"}, {{"RANK", "0"}, {"WORLD_SIZE", "1"}}, 1.0);
  ProgramResult r = RunProgram({HT_CLI, "analyze", dir.path() + "/job"}, {});
  EXPECT_NE(r.out.find("in test_call in thread \"worker5\""), std::string::npos) << r.out << r.err;
  r = RunProgram({HT_CLI, "analyze", "-f", "json", dir.path() + "/job"}, {});
  EXPECT_NE(r.out.find("\"thread\": \"worker5\""), std::string::npos) << r.out;
}

TEST(Runtime, InspectShowsTheHungCallAndItsStack) {
  TempDir dir;
  RunTraced(dir, {"hold"}, {{"HANGTRACE_TIMEOUT", "0.3"}}, 1.5);
  ProgramResult r = RunProgram({HT_CLI, "inspect", dir.path()}, {});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("IN test_call count 7"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[watchdog]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stuck_in_here (traced_prog.c:"), std::string::npos) << r.out;
  // RunProgram ended it with SIGTERM (then SIGKILL): the file says who.
  EXPECT_NE(r.out.find("ended by SIGTERM from test_runtime"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace hangtrace
