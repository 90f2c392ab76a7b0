// hangtrace dump: the live state of every traced process of a job on this
// node, in one folder that `hangtrace analyze` reads (and that
// `hangtrace srun-dump` collects from every node).
//
//   OUT/<host>/<pid>.htrace   a snapshot of each trace file (compact copy; --full: whole)
//   OUT/<host>/node.json      per process: rank, /proc state, heartbeat age,
//                             every thread's native stack (ptrace + libdwfl,
//                             or the kernel's view for a thread that cannot
//                             be stopped); and the node's pre-merge: its
//                             distinct stacks, each with the ranks that have it
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <mutex>
#include <thread>

#include "cmds/commands.h"
#include "dump/native_stacks.h"
#include "dump/processes.h"
#include "merger/rank_set.h"
#include "merger/job_list.h"
#include "merger/node_dump.h"
#include "merger/stack_calls.h"
#include "merger/trace_compact.h"
#include "merger/report.h"
#include "merger/trace_reader.h"
#include "tracer/config.h"
#include "tracer/format.h"

namespace hangtrace {
namespace {

using json = nlohmann::json;

// The dump may run as root in folders other users can write (a shared
// --out, /dev/shm): it never follows a link it did not name itself, writes
// only into its own folder (OUT/<host>, 0700) files it creates (0600,
// O_EXCL), and copies only files owned by the user of the process they
// describe.

// OUT/<host>: made 0700, or reused when it is a real folder of ours. OUT
// itself is followed when the user named it (-o); the default one, a name
// anyone could predict in a shared current folder, must be a real folder
// of ours too.
// A subfolder `name` of our folder `parent_fd` (shown as `shown`): made
// 0700, or reused when it is a real folder of ours; -1 with *error else.
int OpenOwnSubfolder(int parent_fd, const std::string& name, const std::string& shown, std::string* error) {
  if (mkdirat(parent_fd, name.c_str(), 0700) != 0 && errno != EEXIST) {
    *error = "cannot create " + shown + ": " + strerror(errno);
    return -1;
  }
  int fd = openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    *error = shown + " is not a folder of its own (a link, or a file): refused";
  } else if (st.st_uid != geteuid()) {
    *error = shown + " belongs to uid " + std::to_string(st.st_uid) + ", not to this user: refused";
  } else {
    fchmod(fd, 0700);
    return fd;
  }
  if (fd >= 0) close(fd);
  return -1;
}

// OUT/<look>/<host> (OUT/<host> when `look` is ""), each part as above.
int OpenNodeDir(const std::string& out, bool named, const std::string& look, const std::string& host,
                std::string* error) {
  // What the dump makes is 0700, as the report folders and trace folders
  // are: stacks and command lines are the job's user's business.
  std::error_code ec;
  if (named) {
    // The user's choice: followed; what is missing of it is made.
    for (size_t pos = out.find('/', 1);; pos = out.find('/', pos + 1)) {
      const std::string part = out.substr(0, pos);
      if (!part.empty() && mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) {
        ec = std::error_code(errno, std::generic_category());
        break;
      }
      if (pos == std::string::npos) break;
    }
  } else if (mkdir(out.c_str(), 0700) != 0 && errno != EEXIST) {
    ec = std::error_code(errno, std::generic_category());
  }
  if (ec) {
    *error = "cannot create " + out + ": " + ec.message();
    return -1;
  }
  int out_fd = open(out.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | (named ? 0 : O_NOFOLLOW));
  if (out_fd < 0) {
    *error = out + (errno == ELOOP || errno == ENOTDIR ? std::string(" is not a folder of its own (a link, or a file): "
                                                                     "refused (name the dump folder with -o)")
                                                       : ": " + std::string(strerror(errno)));
    return -1;
  }
  struct stat out_st;
  if (!named && (fstat(out_fd, &out_st) != 0 || out_st.st_uid != geteuid())) {
    *error = out + " belongs to uid " + std::to_string(out_st.st_uid) +
             ", not to this user: refused (name the dump folder with -o)";
    close(out_fd);
    return -1;
  }
  if (!look.empty()) {
    const int look_fd = OpenOwnSubfolder(out_fd, look, out + "/" + look, error);
    close(out_fd);
    if (look_fd < 0) return -1;
    out_fd = look_fd;
  }
  const int fd = OpenOwnSubfolder(out_fd, host, out + (look.empty() ? "" : "/" + look) + "/" + host, error);
  close(out_fd);
  return fd;
}

// A new file `name` in our folder `dir_fd`, 0600; one left by an earlier
// dump is replaced (unlinked, never written through).
int CreateIn(int dir_fd, const std::string& name) {
  if (unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT) return -1;
  return openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

// The uid of a live process, or -1.
int64_t ProcessUid(pid_t pid) {
  struct stat st;
  return pid > 0 && stat(("/proc/" + std::to_string(pid)).c_str(), &st) == 0 ? int64_t(st.st_uid) : -1;
}

// Copies `in` (of `size` bytes) into `out` keeping it sparse: only the data
// extents (SEEK_DATA / SEEK_HOLE), so a 256 MiB ring of which a few lanes
// are used costs what they hold.
bool SparseCopy(int in, int out, off_t size) {
  std::vector<char> buf(1 << 20);
  if (ftruncate(out, size) != 0) return false;
  for (off_t pos = 0; pos < size;) {
    off_t data = lseek(in, pos, SEEK_DATA);
    if (data < 0) break;  // no more data: the rest is a hole
    off_t hole = lseek(in, data, SEEK_HOLE);
    if (hole < 0) hole = size;
    for (off_t at = data; at < hole;) {
      ssize_t n = pread(in, buf.data(), size_t(std::min<off_t>(off_t(buf.size()), hole - at)), at);
      if (n <= 0) break;
      if (pwrite(out, buf.data(), size_t(n), at) != n) return false;
      at += n;
    }
    pos = hole;
  }
  return true;
}

// Copies a trace file into the dump folder: compact by default (the
// tables, each lane's newest records and the older ones the analysis needs:
// merger/trace_compact.h), or whole with `full` (SparseCopy). A file the
// compaction cannot read (damaged) is copied whole: the analysis says what
// is wrong with it, and reads what remains. The copy is the snapshot the
// analysis reads; a record being written during the copy is left out,
// never misread (its commit word does not check). `owner`: the uid the file
// must belong to. `bytes`: what the copy takes. `note`: why a file was
// copied whole though a compact copy was asked for ("" otherwise).
bool CopyTrace(const std::string& from, int64_t owner, int dir_fd, const std::string& name, bool full, uint64_t* bytes,
               std::string* error, std::string* note) {
  int in = open(from.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (in < 0) {
    *error = from + ": " + strerror(errno);
    return false;
  }
  struct stat st;
  if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode) || int64_t(st.st_uid) != owner) {
    *error = from + (S_ISREG(st.st_mode) ? ": belongs to uid " + std::to_string(st.st_uid) + ", not to the user of its process"
                                         : std::string(": not a regular file")) + "; not copied";
    close(in);
    return false;
  }
  int out = CreateIn(dir_fd, name);
  if (out < 0) {
    *error = name + ": " + strerror(errno);
    close(in);
    return false;
  }
  CompactCopyStats stats;
  std::string why;
  bool ok = !full && WriteCompactCopy(in, from, out, kCompactBudgetBytes, &stats, &why);
  if (!ok) {
    if (!full) *note = name + ": copied whole, since it could not be compacted (" + why + ")";
    ok = ftruncate(out, 0) == 0 && SparseCopy(in, out, st.st_size);  // nothing of a failed compaction left
  }
  struct stat copied;
  if (ok && fstat(out, &copied) == 0) *bytes = uint64_t(copied.st_blocks) * 512;
  if (!ok) {
    *error = name + ": " + strerror(errno);
    // Nothing half-written left: a copy cut short by a full file system is
    // a file of holes, which a reader on that full tmpfs gets SIGBUS from.
    unlinkat(dir_fd, name.c_str(), 0);
  }
  close(in);
  close(out);
  return ok;
}

std::string Hostname() {
  char h[256] = {};
  gethostname(h, sizeof(h) - 1);
  return h;
}

void OnSignal(int sig) {
  DetachAllTraced();  // never leave a thread of a traced job attached
  signal(sig, SIG_DFL);
  raise(sig);
}

struct Target {
  pid_t pid = 0;
  int32_t rank = -1;
  int32_t world_size = -1;
  std::string rank_from;  // "trace", or the environment variable of an untraced rank
  std::string trace;  // source file, "" when given by --pid only
  std::string copy;   // file name in the dump folder
  Liveness live = Liveness::kUnknown;
  double heartbeat_age_s = -1;
  bool python = false;  // its runtime saw a CPython interpreter, and captures stacks
  bool answered = false;  // it captured its own stacks on our request
  int64_t owner = -1;     // the uid its trace file must belong to
  // A rank's own process that is no rank (a DataLoader's worker, a pool, a
  // subprocess): the rank process it descends from, and its rank.
  pid_t child_of = 0;
  int32_t child_of_rank = -1;
};

// The ranks' own processes that are no ranks (a DataLoader's workers, a
// multiprocessing pool, a subprocess the rank waits for), each a target
// beside its rank: what a rank waits for may be one of them. Only the
// rank's user's, as every process a dump reads. Returns how many.
size_t AddChildProcesses(std::vector<Target>* targets) {
  constexpr size_t kMostPerRank = 8;
  const std::map<pid_t, pid_t> parents = ParentMap();
  std::set<pid_t> known;
  for (const Target& t : *targets) known.insert(t.pid);
  const size_t ranks = targets->size();
  size_t added = 0;
  for (size_t i = 0; i < ranks; ++i) {
    const Target parent = (*targets)[i];  // a copy: the vector grows below
    if (parent.rank < 0 || parent.pid <= 0 || parent.live != Liveness::kRunning) continue;
    const int64_t uid = ProcessUid(parent.pid);
    for (pid_t c : ChildProcesses(parent.pid, parents, kMostPerRank)) {
      if (!known.insert(c).second || ProcessUid(c) != uid) continue;
      Target t;
      t.pid = c;
      t.live = Liveness::kRunning;
      t.owner = uid;
      t.child_of = parent.pid;
      t.child_of_rank = parent.rank;
      targets->push_back(t);
      ++added;
    }
  }
  return added;
}

// Asks every running traced CPython process for a capture round of its own
// (its runtime's background thread answers within about 0.1 s, with Python
// frames from CPython's own dumper, which covers versions the outside
// reader does not), then waits for all of them with one deadline. A
// process that does not answer (wedged, stopped) is simply not waited for.
void RequestCaptures(std::vector<Target>& targets, double timeout_s) {
  constexpr off_t kRequest = offsetof(fmt::FileHeader, counters) + offsetof(fmt::Counters, capture_request);
  constexpr off_t kAnswered = offsetof(fmt::FileHeader, counters) + offsetof(fmt::Counters, capture_answered);
  struct Asked {
    Target* target;
    int fd;
    uint32_t value;
  };
  std::vector<Asked> asked;
  for (Target& t : targets) {
    if (!t.python || t.live != Liveness::kRunning || t.trace.empty()) continue;
    int fd = open(t.trace.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    uint32_t answered = 0;
    if (fd < 0) continue;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || int64_t(st.st_uid) != t.owner) {
      close(fd);  // written only when it is its process's own file
      continue;
    }
    if (pread(fd, &answered, sizeof(answered), kAnswered) != ssize_t(sizeof(answered)) ||
        pwrite(fd, &(answered += 1), sizeof(answered), kRequest) != ssize_t(sizeof(answered))) {
      close(fd);
      continue;
    }
    asked.push_back({&t, fd, answered});
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (Asked& a : asked) {
    for (;;) {
      uint32_t answered = 0;
      if (pread(a.fd, &answered, sizeof(answered), kAnswered) != ssize_t(sizeof(answered))) break;
      if (answered == a.value) {
        a.target->answered = true;
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) break;
      usleep(5000);
    }
    close(a.fd);
  }
}

NodeThread ThreadOf(const DumpedThread& t) {
  NodeThread n;
  n.tid = uint32_t(t.tid);
  n.name = t.name;
  n.state = std::string(1, t.state);
  n.wchan = t.wchan;
  n.syscall = t.syscall;
  n.lock_holder_pid = t.lock_holder_pid;
  n.lock_file = t.lock_file;
  n.method = t.method;
  n.frame_pointer_scan = t.frame_pointer_scan;
  n.moved = t.moved;
  n.error = t.error;
  n.frames = t.frames;
  return n;
}

// `-p` followed by nothing, or by an option (`hangtrace dump -p $(pgrep x)`
// where pgrep found nothing): said plainly, before the parser turns it
// into a conversion error.
bool PidArgumentsMissing(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a != "-p" && a != "--pid") continue;
    if (i + 1 >= argc || argv[i + 1][0] == '-' || !isdigit(static_cast<unsigned char>(argv[i + 1][0]))) return true;
  }
  return false;
}

// Why `pid` cannot be dumped by this user ("" when it can).
std::string CannotDump(pid_t pid) {
  const int64_t uid = ProcessUid(pid);
  if (pid <= 0 || uid < 0) return "no process " + std::to_string(pid);
  if (geteuid() != 0 && uid != int64_t(geteuid())) {
    return "pid " + std::to_string(pid) + " belongs to uid " + std::to_string(uid) +
           ": only its owner (or root) can read its stacks";
  }
  return "";
}

// What a dump reads and writes, as the command line gave it.
struct DumpOptions {
  std::string dir, job, run;
  std::vector<int> pids;
  bool no_stacks, no_symbols, quiet, full, stop_all, no_children, child_stacks;
  bool out_given;                          // -o: the user's folder, followed
  bool job_named, run_named, dir_named;    // --job, --run, --dir given
  int thread_timeout_ms;
};

// One look at the job on this node: into OUT/<look>/<host> (OUT/<host>
// when `look` is ""), or, for processes without a rank named by pid, on
// stdout (*printed). Returns the exit status.
int DumpOnce(const DumpOptions& o, const std::string& out, const std::string& look, bool* printed) {
  const std::string &dir = o.dir, &job = o.job, &run = o.run;
  const std::vector<int>& pids = o.pids;
  const bool no_stacks = o.no_stacks, no_symbols = o.no_symbols, quiet = o.quiet, full = o.full,
             stop_all = o.stop_all, no_children = o.no_children, child_stacks = o.child_stacks,
             out_given = o.out_given;
  const int thread_timeout_ms = o.thread_timeout_ms;
  *printed = false;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string host = Hostname();  // also what the runtime wrote into each file

  // Every trace file of the job on this node, and the processes behind them.
  std::vector<Target> targets;
  std::vector<std::string> warnings;
  const std::string job_dir = dir + "/" + job;
  std::string find_error;
  // With --pid alone, only those processes: the default job folder may hold
  // files of other runs.
  const bool scan_folder = pids.empty() || o.job_named || o.dir_named;
  std::vector<std::string> files;
  if (scan_folder) files = FindTraceFiles(job_dir, &find_error, &warnings);

  // A trace file of the job (or one a process maps): its process is a target.
  auto add_trace = [&](const std::string& f) {
    std::string err;
    ReadOptions header_only;
    header_only.events = false;
    auto s = ReadTraceFile(f, &err, header_only);
    Target t;
    t.trace = f;
    t.copy = std::filesystem::path(f).filename().string();
    if (!s) {
      // Copied when it is ours (the analysis says what is wrong with it);
      // another user's file that is no trace file is none of our business.
      warnings.push_back(err);
      t.owner = geteuid();
      targets.push_back(t);
      return;
    }
    if (s->process.forked) return;  // a fork child of a rank (its stacks come with --pid)
    if (o.run_named && BoundedString(s->process.run, sizeof(s->process.run)) != run) return;  // another run
    // A trace folder on a shared file system holds every node's files: this
    // node dumps its own.
    if (BoundedString(s->process.host, sizeof(s->process.host)) != host) return;
    for (const Target& known : targets) {
      if (known.pid == s->process.pid && known.trace == f) return;
    }
    t.pid = s->process.pid;
    t.rank = s->process.rank;
    t.world_size = s->process.world_size;
    t.rank_from = "trace";
    t.live = ProcessLiveness(*s);
    // The file must belong to its process's user (a dead one's: to ours).
    t.owner = t.live == Liveness::kRunning || t.live == Liveness::kStopped ? ProcessUid(t.pid) : int64_t(geteuid());
    // A CPython process whose runtime may capture stacks (it can be asked).
    t.python = s->process.python_version != 0 && (s->header.features & fmt::kFeatStacks);
    if (s->process.heartbeat_real_ns) {
      auto now = std::chrono::system_clock::now().time_since_epoch();
      t.heartbeat_age_s = double(std::chrono::duration_cast<std::chrono::nanoseconds>(now).count() -
                                 s->process.heartbeat_real_ns) / 1e9;
    }
    targets.push_back(t);
  };
  for (const std::string& f : files) add_trace(f);

  // Processes named by pid (ranks, or a launcher whose descendants are the
  // ranks) and, with --job, the ranks of that SLURM job on this node: traced
  // (their mapped file, wherever --dir put it) or not (rank from environ).
  std::vector<RankedProcess> ranked;
  std::vector<int> plain;
  for (int pid : pids) {
    std::vector<RankedProcess> under = RanksUnder(pid);
    if (under.empty()) plain.push_back(pid);
    ranked.insert(ranked.end(), under.begin(), under.end());
  }
  if (o.job_named) {
    const char* my_job = getenv("SLURM_JOB_ID");
    const char* my_step = getenv("SLURM_STEP_ID");
    const char* my_node = getenv("SLURMD_NODENAME");
    // The job's user: the owner of its trace files, else ourselves unless
    // we are root (then only the job's slurmstepd vouches for a process).
    int64_t owner = geteuid() != 0 ? int64_t(geteuid()) : -1;
    struct stat file_st;
    if (!files.empty() && stat(files.front().c_str(), &file_st) == 0) owner = file_st.st_uid;
    size_t refused = 0;
    std::vector<RankedProcess> of_job =
        RanksOfSlurmJob(job, my_job && job == my_job && my_step ? std::string(my_step) : std::string(),
                        my_job && job == my_job && my_node ? std::string(my_node) : std::string(), owner, &refused);
    ranked.insert(ranked.end(), of_job.begin(), of_job.end());
    if (refused) {
      warnings.push_back(std::to_string(refused) + " process(es) claim SLURM job " + job +
                         " in their environment but run neither under its slurmstepd nor as its user" +
                         (owner >= 0 ? " (uid " + std::to_string(owner) + ")" : std::string()) +
                         ": not dumped (name them with --pid)");
    }
  }
  for (const RankedProcess& r : ranked) {
    if (o.run_named && MappedTraceFile(r.pid).empty()) continue;  // untraced: its run is not known
    bool known = false;
    for (const Target& t : targets) known |= t.pid == r.pid;
    if (known) continue;
    if (const std::string mapped = MappedTraceFile(r.pid); !mapped.empty()) {
      const size_t before = targets.size();
      add_trace(mapped);
      if (targets.size() > before) continue;
    }
    Target t{r.pid, r.rank, r.world_size, r.rank_from, "", "", Liveness::kRunning, -1, false, false, ProcessUid(r.pid)};
    targets.push_back(t);
  }
  if (!quiet && !ranked.empty()) {
    size_t untraced = 0;
    for (const Target& t : targets) untraced += t.trace.empty() && t.rank >= 0;
    fprintf(stderr, "hangtrace dump: %s: %zu rank process(es) found, %zu untraced (rank from their environment)\n",
            host.c_str(), ranked.size(), untraced);
  }
  for (int pid : plain) {
    bool known = false;
    for (const Target& t : targets) known |= t.pid == pid;
    if (!known) targets.push_back(Target{pid, -1, -1, "", "", "", Liveness::kRunning, -1, false, false, ProcessUid(pid)});
  }
  if (!no_children) {
    const size_t children = AddChildProcesses(&targets);
    if (!quiet && children) {
      fprintf(stderr, "hangtrace dump: %s: %zu process(es) of the ranks' own that are no ranks (workers, "
                      "subprocesses): dumped beside their ranks\n", host.c_str(), children);
    }
  }
  if (targets.empty()) {
    if (!find_error.empty()) fprintf(stderr, "hangtrace dump: %s\n", find_error.c_str());
    for (const std::string& w : warnings) fprintf(stderr, "hangtrace dump: %s: %s\n", host.c_str(), w.c_str());
    fprintf(stderr, "hangtrace dump: nothing to dump on %s: no trace files of job %s, and no process %s\n",
            host.c_str(), job.c_str(),
            o.job_named ? "of that SLURM job with a rank" : "named (--pid, or --job for a SLURM job's)");
    // The job's files may be in its user's folder, not this user's.
    for (const std::string& other : TraceFoldersBeside(dir, job)) {
      fprintf(stderr, "hangtrace dump: job %s has trace files in %s: hangtrace dump --dir %s --job %s\n", job.c_str(),
              other.c_str(), other.c_str(), job.c_str());
    }
    return kExitCouldNot;
  }

  // Processes without a rank, named by pid: printed, py-spy style (a
  // folder too when --out is given).
  const bool rankless = !pids.empty() && std::all_of(targets.begin(), targets.end(), [](const Target& t) {
    return t.rank < 0;
  });
  const bool print = rankless && !no_stacks;
  // Printed stacks are a py-spy style look, taken once: into OUT/<host>.
  const std::string folder_look = print ? "" : look;
  const std::string node_dir = out + (folder_look.empty() ? "" : "/" + folder_look) + "/" + host;
  int node_fd = -1;
  if (!print || out_given) {
    std::string dir_error;
    node_fd = OpenNodeDir(out, out_given, folder_look, host, &dir_error);
    if (node_fd < 0) {
      fprintf(stderr, "hangtrace dump: %s\n", dir_error.c_str());
      return kExitCouldNot;
    }
  }

  // Snapshots first (cheap, and what matters most), then stacks, several
  // processes at once: ptrace is per tracer thread, so each worker takes
  // whole processes. Python processes first capture their own stacks.
  if (!no_stacks) RequestCaptures(targets, 1.0);
  uint64_t copied_bytes = 0;
  size_t copied = 0;
  for (Target& t : targets) {
    if (t.trace.empty() || node_fd < 0) continue;
    std::string err;
    uint64_t bytes = 0;
    std::string note;
    if (!CopyTrace(t.trace, t.owner, node_fd, t.copy, full, &bytes, &err, &note)) warnings.push_back("cannot copy " + err);
    else copied_bytes += bytes, ++copied;
    if (!note.empty()) warnings.push_back(note);
  }
  std::vector<ProcessStacks> stacks(targets.size());
  if (!no_stacks || child_stacks) {
    StackOptions so;
    so.thread_timeout_ms = thread_timeout_ms;
    so.symbols = !no_symbols;
    so.stop_all = stop_all;
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t i; (i = next.fetch_add(1)) < targets.size();) {
        const Target& t = targets[i];
        if (t.pid <= 0 || t.live == Liveness::kGone || t.live == Liveness::kZombie) continue;
        if (no_stacks && !t.child_of) continue;  // --child-stacks: the children only
        stacks[i] = CaptureProcessStacks(t.pid, so);
      }
    };
    std::vector<std::thread> pool;
    unsigned n = std::min<unsigned>(8, std::max(1u, std::thread::hardware_concurrency()));
    for (unsigned k = 1; k < n; ++k) pool.emplace_back(work);
    work();
    for (auto& th : pool) th.join();
  }

  // Nothing could be read of any live process (ptrace refused, every
  // process gone): said, and a failure, as py-spy's.
  size_t live = 0, readable = 0;
  std::string first_error;
  for (size_t i = 0; i < targets.size(); ++i) {
    if (targets[i].pid <= 0 || targets[i].live == Liveness::kGone || targets[i].live == Liveness::kZombie) continue;
    ++live;
    bool any = false;
    std::string thread_error;  // why its first thread could not be read, when the process says nothing
    for (const DumpedThread& th : stacks[i].threads) {
      any |= !th.frames.empty();
      if (thread_error.empty() && !th.error.empty()) {
        thread_error = "pid " + std::to_string(targets[i].pid) + " thread " + std::to_string(th.tid) + ": " + th.error;
      }
    }
    readable += any || no_stacks;
    if (!any && first_error.empty()) first_error = stacks[i].error.empty() ? thread_error : stacks[i].error;
  }
  const bool none_read = live > 0 && readable == 0;

  // node.json, with the node's pre-merge: distinct stacks and their ranks.
  NodeDump node;
  node.host = host;
  node.job = job;
  std::map<std::vector<std::string>, std::pair<std::vector<Frame>, RankSet>> distinct;  // by frame text
  size_t threads = 0, unwound = 0;
  for (size_t i = 0; i < targets.size(); ++i) {
    const Target& t = targets[i];
    const ProcessStacks& ps = stacks[i];
    NodeProcess p;
    p.pid = t.pid;
    p.rank = t.rank;
    p.world_size = t.world_size;
    p.rank_from = t.rank_from;
    p.trace = t.copy;
    p.liveness = t.live;
    p.child_of = t.child_of;
    p.child_of_rank = t.child_of_rank;
    p.heartbeat_age_s = t.heartbeat_age_s;
    p.captured_on_request = t.answered;
    p.state_before = std::string(1, ps.state_before);
    p.state_after = std::string(1, ps.state_after);
    p.error = ps.error;
    p.seconds = ps.seconds;
    if (ps.python_version) {
      p.python_version = std::to_string(ps.python_version >> 24) + "." + std::to_string((ps.python_version >> 16) & 0xff) +
                         "." + std::to_string((ps.python_version >> 8) & 0xff);
      p.python_error = ps.python_error;
    }
    if (t.pid > 0) {
      std::ifstream in("/proc/" + std::to_string(t.pid) + "/cmdline");
      std::getline(in, p.cmdline, '\n');
      std::replace(p.cmdline.begin(), p.cmdline.end(), '\0', ' ');
      while (!p.cmdline.empty() && p.cmdline.back() == ' ') p.cmdline.pop_back();
    }
    for (const DumpedThread& th : ps.threads) {
      p.threads.push_back(ThreadOf(th));
      ++threads;
      unwound += th.method == "ptrace" || th.method == "blocked";
      if (t.rank >= 0 && !th.frames.empty()) {
        std::vector<std::string> key;
        for (const Frame& f : th.frames) key.push_back(f.Text());
        auto& [frames, ranks] = distinct[key];
        frames = th.frames;
        ranks.Add(t.rank);
      }
    }
    if (!ps.error.empty()) warnings.push_back(ps.error);
    if (!ps.python_error.empty()) {
      warnings.push_back("pid " + std::to_string(t.pid) + ": Python frames from outside: " + ps.python_error +
                         (t.answered ? "; its own capture, taken on request, has them" : ""));
    }
    node.processes.push_back(std::move(p));
  }
  *printed = print;
  if (print) {
    for (const NodeProcess& p : node.processes) fputs(ProcessStacksText(p).c_str(), stdout);
  }
  for (const auto& [key, group] : distinct) {
    node.stack_groups.push_back({group.first, group.second.ToString(), group.second.Count()});
  }
  node.warnings = warnings;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  node.seconds = seconds;
  int status = kExitNoHang;
  if (node_fd >= 0) {
    const std::string text = JsonText(NodeToJson(node), 1) + "\n";
    int node_json = CreateIn(node_fd, kNodeFile);
    if (node_json < 0 || write(node_json, text.data(), text.size()) != ssize_t(text.size())) {
      fprintf(stderr, "hangtrace dump: cannot write %s/%s: %s\n", node_dir.c_str(), kNodeFile, strerror(errno));
      status = kExitCouldNot;
    }
    if (node_json >= 0) close(node_json);
    close(node_fd);
  }

  if (!quiet) {
    for (const std::string& w : warnings) fprintf(stderr, "hangtrace dump: %s: %s\n", host.c_str(), w.c_str());
    std::string files;
    if (copied) {
      char b[96];
      snprintf(b, sizeof(b), ", %zu trace file(s) %s %.1f KB each", copied, full ? "whole:" : "compact:",
               double(copied_bytes) / 1024.0 / double(copied));
      files = b;
    }
    fprintf(stderr, "hangtrace dump: %s: %zu process(es), %zu thread(s), %zu unwound%s, in %.2f s%s\n", host.c_str(),
            targets.size(), threads, unwound, files.c_str(), seconds, node_fd >= 0 ? (" -> " + node_dir).c_str() : "");
  }
  // A job whose every process has ended (a stale folder): its files are
  // what is left, and analyze reads them as they are.
  const bool all_ended = !targets.empty() && std::all_of(targets.begin(), targets.end(), [](const Target& t) {
    return t.live == Liveness::kGone || t.live == Liveness::kZombie;
  });
  if (all_ended && !quiet) {
    fprintf(stderr, "hangtrace dump: every process of job %s has ended: the dump holds their files as they were "
                    "left (hangtrace analyze %s reads them too)\n", job.c_str(), job_dir.c_str());
  }
  if (none_read) {
    fprintf(stderr, "hangtrace dump: could not read the stacks of any process%s%s\n", first_error.empty() ? "" : ": ",
            first_error.c_str());
    return kExitCouldNot;
  }
  return status;
}

}  // namespace

int DumpCommand(int argc, char** argv) {
  Config env = Config::FromEnvironment();
  CLI::App app{
      "Dump the live state of every traced process of a job on this node: a snapshot of each\n"
      "trace file, each process's state, and every thread's native stack (libdwfl). It looks\n"
      "twice, 2 s apart (OUT/first/<host>/, OUT/second/<host>/; --looks 1: OUT/<host>/), and\n"
      "`hangtrace analyze OUT` reads the second look against the first: one look shows where\n"
      "each rank is, not since when, and cannot tell a job at work from a hung one.\n\n"
      "What a dump costs a live process: a thread blocked in a system call (a hung rank's\n"
      "helpers, a rank waiting in a lock, a sleep, a poll) is read where it waits, from the\n"
      "stack pointer and pc /proc gives and its memory: it is not stopped and its call is not\n"
      "disturbed. A running thread (a rank spinning in MPI's progress loop, or computing) is\n"
      "stopped while its registers and stack are copied (ptrace; no signal is sent; in a\n"
      "Python process until its Python frames are read) and goes on where it was; the unwind\n"
      "and the naming work on the copy. A traced Python process is asked to capture its own stacks first, which\n"
      "holds its running threads up to a second. Targets are never left stopped, even when the\n"
      "dump is killed. --stop-all stops blocked threads too, for stacks that frame pointers cut\n"
      "short; a stop then makes epoll_wait, sigtimedwait, semop and socket reads with a timeout\n"
      "in those threads return EINTR.\n\n"
      "examples:\n"
      "  hangtrace dump --job 12345 --out /shared/dump-12345     # on a node of job 12345\n"
      "  hangtrace dump --pid 4242                               # one process: its threads' stacks, py-spy style\n"
      "  hangtrace dump -p $(pgrep -x mpirun) -o /tmp/d          # a launcher: its ranks, traced or not\n"
      "  srun --jobid=12345 --overlap --ntasks-per-node=1 hangtrace dump --out /shared/d\n"
      "     (hangtrace srun-dump 12345 does this, then analyzes)\n",
      "hangtrace dump"};
  std::string dir = ExpandUser(env.dir), job = env.job, out;
  std::vector<int> pids;
  bool no_stacks = false, no_symbols = false, quiet = false, full = false, stop_all = false;
  int thread_timeout_ms = 2000;
  app.add_option("--dir", dir, "trace folder root (default $HANGTRACE_DIR or " + dir + ")");
  app.add_option("--job", job,
                 "job id: the subfolder of --dir (default as the runtime names it: " + env.job +
                     "); given, also every process on this node whose SLURM_JOB_ID it is, traced or not");
  app.add_option("-o,--out", out, "dump folder (default ./hangtrace-dump-<job>); this node writes OUT/<host>/");
  app.add_option("-p,--pid", pids,
                 "also (or only, without trace files) these processes; a launcher's pid (mpirun, srun's "
                 "slurmstepd, torchrun) stands for its ranks")
      ->expected(-1);
  app.add_flag("--no-stacks", no_stacks, "trace files and /proc state only: attach to nothing");
  bool no_children = false, child_stacks = false;
  app.add_flag("--child-stacks", child_stacks,
               "with --no-stacks: still read the stacks of the ranks' own processes that are no ranks, from "
               "outside (they capture none of their own; what the automatic report uses)");
  app.add_flag("--no-children", no_children,
               "leave out the ranks' own processes that are no ranks (by default a rank's DataLoader workers, "
               "pool and subprocesses are dumped beside it: a rank may wait for one of them)");
  app.add_flag("--full", full,
               "copy each trace file whole (its whole ring: for Perfetto timelines); by default a compact copy "
               "of about 64 KB per process: what the diagnosis needs, the newest records of each thread");
  app.add_flag("--no-symbols", no_symbols, "raw addresses (faster on huge binaries)");
  app.add_flag("--stop-all", stop_all,
               "stop every thread, blocked ones too, and unwind from all its registers (some blocked calls "
               "then return EINTR: see above)");
  app.add_option("--thread-timeout-ms", thread_timeout_ms, "how long a thread may take to stop (default 2000)");
  app.add_flag("--quiet", quiet, "no progress lines");
  int looks = 2;
  double settle = 2;
  app.add_option("--looks", looks,
                 "2 (default): two dumps, --settle seconds apart, into OUT/first and OUT/second, which "
                 "`hangtrace analyze OUT` reads as one job seen twice (ranks that moved are slow, not hung; one look "
                 "cannot tell a wait from a hang); 1: one dump, into OUT")
      ->check(CLI::Range(1, 2));
  app.add_option("--settle", settle, "seconds between the two looks (default 2)")->check(Seconds());
  std::string run;
  app.add_option("--run", run,
                 "only the traced processes of this run of the job (HANGTRACE_RUN; what `hangtrace inspect` "
                 "calls run; \"\" for files that name none): one job id may hold several runs");
  if (PidArgumentsMissing(argc, argv)) {
    fprintf(stderr,
            "hangtrace dump: --pid needs process ids (did the command that should give them, such as "
            "$(pgrep -x mpirun), find none?)\n");
    return kExitUsage;
  }
  HT_PARSE(app, argc, argv);
  // Processes named by pid must exist and be ours to read, as py-spy says.
  for (int pid : pids) {
    const std::string why = CannotDump(pid);
    if (!why.empty()) {
      fprintf(stderr, "hangtrace dump: %s\n", why.c_str());
      return kExitCouldNot;
    }
  }
  // Which job, when none is named: the folder's only job, or its only
  // running one, as analyze takes it; several: the user says which.
  if (!app.count("--job") && pids.empty()) {
    std::string list_error;
    const std::vector<JobSummary> jobs = ListJobs(dir, &list_error, nullptr);
    std::vector<const JobSummary*> running;
    for (const JobSummary& j : jobs) {
      if (j.Live()) running.push_back(&j);
    }
    const JobSummary* only = jobs.size() == 1 ? &jobs[0] : running.size() == 1 ? running[0] : nullptr;
    if (only) {
      job = only->job;
    } else if (!jobs.empty()) {
      fprintf(stderr, "hangtrace dump: %s holds %zu jobs%s; name one with --job:\n", dir.c_str(), jobs.size(),
              running.empty() ? ", none running" : (", " + std::to_string(running.size()) + " running").c_str());
      for (const JobSummary& j : jobs) {
        fprintf(stderr, "  hangtrace dump --job %s    # %s, %zu files\n", j.job.c_str(), JobStateName(j.state), j.files);
      }
      return kExitUsage;
    }
  }
  // Processes without a rank (a Python script, a server): their stacks go
  // to stdout, as py-spy prints them; a folder only when --out is given.
  const bool out_given = !out.empty();
  // Processes named by pid: the job is theirs (a rank's trace file says it,
  // else SLURM's job id in its environment), not this shell's.
  if (!app.count("--job") && !pids.empty()) {
    for (int pid : pids) {
      std::string of_pid;
      for (const RankedProcess& r : RanksUnder(pid)) {
        if (const std::string mapped = MappedTraceFile(r.pid); !mapped.empty()) {
          std::string err;
          ReadOptions header_only;
          header_only.events = false;
          if (auto s = ReadTraceFile(mapped, &err, header_only)) of_pid = BoundedString(s->process.job, sizeof(s->process.job));
        }
        if (of_pid.empty()) of_pid = r.slurm_job;
        if (!of_pid.empty()) break;
      }
      if (!of_pid.empty()) {
        job = of_pid;
        break;
      }
    }
  }
  if (out.empty()) out = "hangtrace-dump-" + job;

  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  signal(SIGHUP, OnSignal);
  DumpOptions o{dir, job, run, pids, no_stacks, no_symbols, quiet, full, stop_all, no_children, child_stacks,
                out_given, app.count("--job") > 0, app.count("--run") > 0, app.count("--dir") > 0,
                thread_timeout_ms};
  bool printed = false;
  if (looks == 1) return DumpOnce(o, out, "", &printed);
  const auto t0 = std::chrono::steady_clock::now();
  const int first = DumpOnce(o, out, "first", &printed);
  // Processes without a rank, printed: a py-spy style look, once.
  if (printed || first != kExitNoHang) return first;
  std::this_thread::sleep_for(std::chrono::duration<double>(settle));
  const int second = DumpOnce(o, out, "second", &printed);
  if (!quiet && second == kExitNoHang) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fprintf(stderr,
            "hangtrace dump: two looks, %.1f s apart, in %.1f s: %s/first, %s/second (hangtrace analyze %s reads "
            "the second against the first: ranks that moved are slow, not hung)\n",
            settle, seconds, out.c_str(), out.c_str(), out.c_str());
  }
  return second;
}

}  // namespace hangtrace
