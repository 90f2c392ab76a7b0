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
#include "tracer/runtime.h"

extern char** environ;

namespace hangtrace {
namespace {

constexpr char kRoundFile[] = "report.round";
constexpr int64_t kRoundGapNs = 60ll * 1000000000;  // one round a minute at most

pid_t g_helper = 0;         // the running helper, 0: none
int64_t g_round_start = 0;  // when this process started its round; 0: none held
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

// The folder every node writes its dumps into: HANGTRACE_REPORT_DIR, else
// hangtrace-report-<job> in the folder the job was submitted from (SLURM),
// else the one it was launched from.
std::string ReportFolder(const char* job) {
  std::string dir = ExpandUser(RuntimeConfig().report_dir);
  if (!dir.empty()) return dir;
  const char* base = getenv("SLURM_SUBMIT_DIR");
  if (!base || !*base) base = getenv("PWD");
  std::string where = base && *base ? base : ".";
  return where + "/hangtrace-report-" + job;
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
  int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null >= 0) dup2(null, 0);
  // Only stdout and stderr go with it: a socket of the MPI library or of
  // the launcher held open by the helper would hide the rank's death from
  // them (a PMIx server notices it by the socket's close) while it runs.
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

// Another node's round was announced in the shared folder within the gap.
bool RoundAnnounced(const char* job) {
  struct stat st;
  const std::string marker = ReportFolder(job) + "/round.started";
  return stat(marker.c_str(), &st) == 0 && time(nullptr) - st.st_mtime < kRoundGapNs / 1000000000;
}

void AutoReportTick(TraceFile* f, bool fired, bool idle, double timeout_s) {
  const int64_t now = MonotonicNs();
  if (g_helper > 0) {
    int status;
    if (waitpid(g_helper, &status, WNOHANG | __WALL) != 0) g_helper = 0;  // ended (or not ours: ECHILD)
  }
  if (g_round_start && g_helper == 0 && now - g_round_start >= kRoundGapNs) {
    unlinkat(f->dir_fd, kRoundFile, 0);  // the node may start another round
    g_round_start = 0;
  }
  // Most ticks end here: nothing fired, and no look for a round is due.
  const bool look = !fired && idle && now >= g_next_look && FirstOnNode();
  if ((!fired && !look) || g_round_start || f->dir_fd < 0 || !AutoReportOn()) return;
  // The job's trace folder: DIR/JOB (f->path is DIR/JOB/host.pid.htrace once named).
  std::string folder = f->path;
  if (f->naming == kNamed) folder = folder.substr(0, folder.rfind('/'));
  const std::string job = folder.substr(folder.rfind('/') + 1);
  if (look) {
    g_next_look = now + 2ll * 1000000000;
    if (!RoundAnnounced(job.c_str())) return;
  }
  int fd = openat(f->dir_fd, kRoundFile, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) {
    // Another process of the node has the round; unless it died holding it.
    struct stat st;
    if (fstatat(f->dir_fd, kRoundFile, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        time(nullptr) - st.st_mtime > 2 * kRoundGapNs / 1000000000) {
      unlinkat(f->dir_fd, kRoundFile, 0);
    }
    return;
  }
  if (fd < 0) return;
  const std::string pid = std::to_string(getpid()) + "\n";
  if (write(fd, pid.data(), pid.size()) < 0) {
  }
  close(fd);
  g_round_start = now;
  const std::string root = folder.substr(0, folder.rfind('/'));
  char timeout[32];
  snprintf(timeout, sizeof(timeout), "%g", timeout_s);
  const std::string cli = HelperPath();
  if (cli.empty() || !StartHelper(cli, {"auto-report", "--dir", root, "--job", job, "--out", ReportFolder(job.c_str()),
                                        "--timeout", timeout})) {
    if (!g_said_unavailable) {
      g_said_unavailable = true;
      WriteStderrLine("hangtrace: watchdog: cannot start `hangtrace auto-report` for the automatic report "
                      "(HANGTRACE_CLI names the hangtrace binary); run hangtrace srun-dump or hangtrace dump");
    }
  }
}

}  // namespace hangtrace
