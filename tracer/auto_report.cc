// The automatic report (docs/DUMP.md, "The automatic report"): when the
// watchdog fires, one process per node runs `hangtrace auto-report`, which
// dumps the node twice (compact, seconds apart) into a folder every node
// sees; the first node to finish reports for the whole job on stderr, the
// job's log. This file is the runtime's part: which process of the node
// starts the helper, and starting it without disturbing the program.
//
// Election without a daemon: the first process of the node whose watchdog
// fires creates `report.round` in the job's trace folder, which is the
// node's (/dev/shm), with O_EXCL. It starts the helper and removes the file
// a round's gap later, so a slow job that keeps firing makes one round a
// minute, not one per call. A round file whose owner died is taken over
// once it is older than that. A node whose every rank is in no traced call
// (a rank stuck computing, the others of its node done) has no watchdog to
// fire: its first local rank, once idle for the timeout, looks every 2 s
// for the round another node announced in the shared folder
// (`round.started`, written by the helper) and joins it. Nothing is looked
// for in a job whose watchdog never fired, so a healthy job's long compute
// phases cost no file system traffic.
//
// The helper is started with clone(CLONE_VM | CLONE_VFORK) and no exit
// signal: the program gets no SIGCHLD, and its wait(-1) never reaps it (only
// __WALL waits for such a child), so a program's own child handling is
// untouched; the background thread reaps it with WNOHANG, never blocking
// (its heartbeat must go on).
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tracer/clock.h"
#include "tracer/config.h"
#include "tracer/internal.h"
#include "tracer/procfs.h"
#include "tracer/report_folder.h"
#include "tracer/runtime.h"

extern char** environ;

namespace hangtrace {
namespace {

constexpr int64_t kRoundGapNs = 60ll * 1000000000;  // one round a minute at most

pid_t g_helper = 0;         // the running helper, 0: none
char g_report_where[512];   // its report folder, for the line at exit
char g_helper_log[64];      // its log's name in the job's trace folder
int64_t g_round_start = 0;  // when this process took its node's round; 0: none held
// The round held was started by this process found blocked outside traced
// calls: when its helper finds no hang, the node's round is given back at
// once, so that a real hang soon after is not left to wait out the gap.
bool g_round_blocked_only = false;
bool g_said_unavailable = false;
int64_t g_next_look = 0;    // when an idle first local rank looks for a round next

// Where the helper is: HANGTRACE_CLI (`hangtrace run` sets it), else
// ../bin/hangtrace beside libhangtrace.so.
std::string HelperPath() {
  std::string cli = ExpandUser(RuntimeConfig().cli);
  if (cli.empty()) {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&HelperPath), &info) && info.dli_fname) {
      std::string lib = info.dli_fname;
      cli = lib.substr(0, lib.rfind('/') + 1) + "../bin/hangtrace";
    }
  }
  return !cli.empty() && access(cli.c_str(), X_OK) == 0 ? cli : std::string();
}

// The run's name in the report folder and in the node's round file: its
// identity (HANGTRACE_RUN, or what the launcher says), "run" when unknown.
std::string RunName() {
  const std::string& run = RuntimeConfig().run;
  return run.empty() ? std::string("run") : run;
}

// The report folder of `job`, opened and checked (report_folder.h): the
// default, or when its folder cannot take it (a launch folder the user may
// not write in) the user's own fallback; `create` on a fire, not on a look.
struct Where {
  int fd = -1;
  std::string path, why;
  bool fallback = false;  // the default could not be made: `why` says so
};
Where OpenReportFolder(const std::string& job, bool create) {
  Where w;
  w.path = report_folder::DefaultPath(job);
  // A folder the user named is made whole; the default only where the job
  // was launched (a launch folder that is gone is not made again).
  const bool named = !RuntimeConfig().report_dir.empty();
  bool cannot_create = false;
  w.fd = report_folder::Open(w.path, create, &w.why, &cannot_create, /*create_parents=*/named);
  if (w.fd >= 0 || !cannot_create || named) return w;
  const std::string fallback = report_folder::FallbackPath(job);
  std::string why;
  const int fd = fallback.empty() ? -1 : report_folder::Open(fallback, create, &why, nullptr, /*create_parents=*/true);
  if (fd < 0) return w;
  w.fd = fd;
  w.fallback = true;
  w.why += "; the report goes to " + fallback;
  w.path = fallback;
  return w;
}

// A rank's environment, less what would make the helper look like a rank
// (the dump takes processes with a rank in their environment for ranks,
// and leaves out the processes of its own SLURM step: with the rank's
// SLURM_STEP_ID it would leave out the ranks) or trace it.
bool LeftToTheRank(const char* v) {
  static const char* const kPrefixes[] = {"LD_PRELOAD=", "SLURM_", "OMPI_", "PMI_", "PMIX_", "PMI_RANK", "HANGTRACE_",
                                          "RANK=", "LOCAL_RANK=", "WORLD_SIZE=", "MPI_LOCALRANKID=", "PALS_"};
  for (const char* p : kPrefixes) {
    if (strncmp(v, p, strlen(p)) == 0) return true;
  }
  return false;
}

struct Spawn {
  const char* path;
  char* const* argv;
  char* const* envp;
};

int SpawnChild(void* arg) {
  const Spawn* s = static_cast<const Spawn*>(arg);
  // Only async-signal-safe calls here: the memory is the parent's.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);  // the tracer thread blocks every signal; the helper must not
  // A signal the program ignores stays ignored across exec: the helper's
  // SIGTERM and SIGALRM (its own deadline) must end it.
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGALRM, SIGPIPE}) sigaction(sig, &dfl, nullptr);
  // None of the job's descriptors: not its stdout and stderr (mpirun and
  // srun wait for every holder of their output pipes: a job would end only
  // when the helper does), nor a socket of the MPI library or the launcher
  // (a PMIx server notices a rank's death by its close). The helper writes
  // its lines into its log, which the process that started it prints.
  const int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
  }
  if (syscall(SYS_close_range, 3u, ~0u, 0u) != 0) {
    for (int fd = 3; fd < 4096; ++fd) close(fd);
  }
  execve(s->path, s->argv, s->envp);
  _exit(127);
}

bool StartHelper(const std::string& cli, const std::vector<std::string>& args) {
  std::vector<char*> argv, envp;
  argv.push_back(const_cast<char*>(cli.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (char** e = environ; e && *e; ++e) {
    if (!LeftToTheRank(*e)) envp.push_back(*e);
  }
  envp.push_back(nullptr);
  Spawn s{cli.c_str(), argv.data(), envp.data()};
  constexpr size_t kStack = 64 * 1024;
  void* stack = mmap(nullptr, kStack, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return false;
  // No exit signal (the low byte of the flags is 0): see the top.
  pid_t pid = clone(SpawnChild, static_cast<char*>(stack) + kStack, CLONE_VM | CLONE_VFORK, &s);
  munmap(stack, kStack);  // the child has exec'ed (or exited) by now: CLONE_VFORK
  if (pid <= 0) return false;
  g_helper = pid;
  return true;
}

// Takes the node's round of this run (the round file in the job's trace
// folder, O_EXCL), unless another process has it; a round file whose owner
// died is taken over once it is older than two gaps.
// The process that holds a round file ("PID START", START its start time
// in clock ticks since boot) is gone: the file is a killed run's (one that
// reused this run's name), or older than two gaps.
bool RoundIsStale(TraceFile* f, const std::string& name) {
  struct stat st;
  if (fstatat(f->dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
  if (time(nullptr) - st.st_mtime > 2 * kRoundGapNs / 1000000000) return true;
  std::string text;
  if (!report_folder::Read(f->dir_fd, name, &text, 64)) return false;
  const long pid = strtol(text.c_str(), nullptr, 10);
  const char* space = strchr(text.c_str(), ' ');
  const unsigned long long start = space ? strtoull(space + 1, nullptr, 10) : 0;
  ProcStat holder;
  if (pid <= 0) return false;
  return !ReadProcStat(pid_t(pid), &holder) || (start && holder.start_time != start);
}

bool TakeRound(TraceFile* f, int64_t now) {
  const std::string name = "report.round." + RunName();
  int fd = openat(f->dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST && RoundIsStale(f, name)) {
    unlinkat(f->dir_fd, name.c_str(), 0);
    fd = openat(f->dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  }
  if (fd < 0) return false;
  ProcStat me;
  const std::string holder =
      std::to_string(getpid()) + " " + std::to_string(ReadProcStat(0, &me) ? me.start_time : 0) + "\n";
  if (write(fd, holder.data(), holder.size()) < 0) {
  }
  close(fd);
  g_round_start = now;
  return true;
}

// The helper ended: what it said (its log) goes to this process's stderr,
// the job's log, unless the program has put something else on fd 2. One
// that was killed (SIGTERM, its deadline, a fault) is said too: never
// silence.
void PrintHelperLog(TraceFile* f, int status) {
  if (!g_helper_log[0] || f->dir_fd < 0) return;
  std::string text;
  if (report_folder::Read(f->dir_fd, g_helper_log, &text, 256 * 1024) && !text.empty()) {
    WriteStderrBlock(text.data(), text.size());
  }
  if (WIFSIGNALED(status)) {
    char line[300];
    snprintf(line, sizeof(line),
             "hangtrace: no automatic report: its helper was ended by signal %d (%s) before it reported; "
             "hangtrace srun-dump or hangtrace dump give one",
             WTERMSIG(status), strsignal(WTERMSIG(status)));
    WriteStderrLine(line);
  }
  unlinkat(f->dir_fd, g_helper_log, 0);
  g_helper_log[0] = '\0';
}

}  // namespace

bool AutoReportOn() {
  const Config& c = RuntimeConfig();
  if (!c.report || c.quiet) return false;
  static int available = -1;  // checked once: the helper is where it was
  if (available < 0) available = !HelperPath().empty();
  return available == 1;
}

// This process is its node's first: local rank 0 as the launcher says (or
// no launcher said: then every process counts).
bool FirstOnNode() {
  static int first = -1;
  if (first < 0) {
    first = 1;
    for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "PMI_LOCAL_RANK",
                          "PALS_LOCAL_RANKID", "LOCAL_RANK"}) {
      if (const char* x = getenv(v); x && *x) {
        first = atoi(x) == 0;
        break;
      }
    }
  }
  return first == 1;
}

bool AutoReportTick(TraceFile* f, bool fired, bool idle, double timeout_s, const char* blocked_why) {
  const bool blocked_only = blocked_why != nullptr;
  const int64_t now = MonotonicNs();
  if (g_helper > 0) {
    int status;
    const pid_t ended = waitpid(g_helper, &status, WNOHANG | __WALL);
    if (ended != 0) {  // ended (or not ours: ECHILD)
      g_helper = 0;
      PrintHelperLog(f, ended > 0 ? status : 0);
      if (g_round_blocked_only && ended > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        unlinkat(f->dir_fd, ("report.round." + RunName()).c_str(), 0);  // no hang found: the node may start another
        g_round_start = 0;
        RearmBlockedProbe();
      }
    }
  }
  if (g_round_start && g_helper == 0 && now - g_round_start >= kRoundGapNs) {
    unlinkat(f->dir_fd, ("report.round." + RunName()).c_str(), 0);  // the node may start another round
    g_round_start = 0;
  }
  // Most ticks end here: nothing fired, and no look for a round is due.
  const bool look = !fired && idle && now >= g_next_look && FirstOnNode();
  if ((!fired && !look) || f->dir_fd < 0 || !AutoReportOn()) return false;
  // The report is a job's, of its ranks: a process without a rank (a
  // program run alone under `hangtrace run`) says its watchdog lines.
  if (f->process->rank < 0) return false;
  if (g_round_start) return fired;  // this process's round covers it
  // The job's trace folder: DIR/JOB (f->path is DIR/JOB/host.pid.htrace once named).
  std::string folder = f->path;
  if (f->naming == kNamed) folder = folder.substr(0, folder.rfind('/'));
  const std::string job = folder.substr(folder.rfind('/') + 1);
  if (look) {
    // Another node's round of this run, announced within the gap?
    g_next_look = now + 2ll * 1000000000;
    Where w = OpenReportFolder(job, /*create=*/false);
    if (w.fd < 0) return false;
    std::string why;
    const int run = report_folder::OpenSub(w.fd, RunName(), false, &why);
    const long long at = run >= 0 ? report_folder::ModifiedAt(run, "round.started") : -1;
    if (run >= 0) close(run);
    close(w.fd);
    if (at < 0 || time(nullptr) - at >= kRoundGapNs / 1000000000) return false;
  }
  Where w = OpenReportFolder(job, /*create=*/true);
  if (w.fd >= 0) {
    // The run's folder too: a link or a folder another user made under its
    // name (in a sticky shared folder) refuses the report here, where the
    // watchdog's lines can still be printed.
    const int run = report_folder::OpenSub(w.fd, RunName(), true, &w.why, w.path);
    if (run < 0) {
      close(w.fd);
      w.fd = -1;
    } else {
      close(run);
    }
  }
  if (w.fd < 0) {
    // No report can be made: the watchdog's lines say what each rank
    // waits in, and the node's round taker says why, once a round.
    if (fired && TakeRound(f, now)) {
      WriteStderrLine(("hangtrace: no automatic report: " + w.why +
                       "; each rank's watchdog line follows (hangtrace srun-dump or hangtrace dump still work)")
                          .c_str());
    }
    return false;
  }
  close(w.fd);
  if (!TakeRound(f, now)) return fired;  // another process of the node has this round
  // Where the report goes, for `hangtrace ls` and `clean` (the folder is
  // outside the trace folder, often in the launch folder).
  report_folder::WriteWhole(f->dir_fd, "report.where", w.path + "\n");
  snprintf(g_helper_log, sizeof(g_helper_log), "report.log.%d", int(getpid()));
  unlinkat(f->dir_fd, g_helper_log, 0);  // a dead predecessor's of this pid
  const std::string root = folder.substr(0, folder.rfind('/'));
  char timeout[32];
  snprintf(timeout, sizeof(timeout), "%g", timeout_s);
  std::vector<std::string> args = {"auto-report", "--dir", root, "--job", job, "--run", RuntimeConfig().run, "--out", w.path,
                                   "--timeout", timeout, "--log", folder + "/" + g_helper_log};
  if (w.fallback) args.insert(args.end(), {"--note", w.why});
  if (blocked_only) {
    args.push_back("--blocked");
    args.push_back("--because");
    args.push_back("rank " + std::to_string(f->process->rank) + " (pid " + std::to_string(getpid()) + ") was " +
                   blocked_why);
  }
  g_round_blocked_only = blocked_only;
  snprintf(g_report_where, sizeof(g_report_where), "%s", w.path.c_str());
  const std::string cli = HelperPath();
  if (cli.empty() || !StartHelper(cli, args)) {
    g_helper_log[0] = '\0';
    if (!g_said_unavailable) {
      g_said_unavailable = true;
      WriteStderrLine("hangtrace: watchdog: cannot start `hangtrace auto-report` for the automatic report "
                      "(HANGTRACE_CLI names the hangtrace binary); run hangtrace srun-dump or hangtrace dump");
    }
    return false;
  }
  return true;
}

void AutoReportAtExit() {
  if (g_helper <= 0) return;
  int status;
  if (waitpid(g_helper, &status, WNOHANG | __WALL) != 0) return;  // done: its log was for a live rank to print
  char line[700];
  snprintf(line, sizeof(line),
           "hangtrace: this process exits while its automatic report is being made: the report will be in %s",
           g_report_where);
  WriteStderrLine(line);
}

}  // namespace hangtrace
