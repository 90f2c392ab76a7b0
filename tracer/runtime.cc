// The runtime: creates and lays out the trace file, attaches threads to
// lanes, keeps the call and communicator tables, and handles fork and exit.
// The record path itself is inline in runtime.h.
#include "tracer/runtime.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tracer/hash.h"
#include "tracer/internal.h"
#include "tracer/procfs.h"

namespace hangtrace {

TraceFile* g_trace = nullptr;
uint32_t g_generation = 0;
thread_local ThreadState t_thread __attribute__((tls_model("initial-exec")));
bool g_clock_is_tsc = false;

namespace {

// Constructed on first use: the preload constructor runs before the
// library's own static constructors.
Config& Settings() {
  static Config* config = new Config();
  return *config;
}
TraceFile g_file_storage;          // the file of this process (no heap)
pthread_mutex_t g_table_lock = PTHREAD_MUTEX_INITIALIZER;  // call and name tables
pthread_key_t g_thread_key;
bool g_once_done = false;

void CopyString(char* dst, size_t cap, const char* src) {
  if (!src) src = "";
  size_t n = strnlen(src, cap - 1);
  memcpy(dst, src, n);
  dst[n] = '\0';
}

// Field 22 of /proc/self/stat: start time in clock ticks since boot.
uint64_t ProcStartTime() {
  ProcStat st;
  return ReadProcStat(0, &st) ? st.start_time : 0;
}

bool ParseInt(const char* s, int32_t* out) {
  if (!s || !*s) return false;
  char* end = nullptr;
  long v = strtol(s, &end, 10);
  if (*end || v < 0 || v > INT32_MAX) return false;
  *out = int32_t(v);
  return true;
}

void FillProcessInfo(fmt::ProcessInfo* p, const Config& c) {
  p->pid = getpid();
  p->ppid = getppid();
  p->rank = -1;
  p->world_size = -1;
  for (const RankVariable& e : kRankVariables) {
    int32_t r;
    if (ParseInt(getenv(e.rank), &r)) {
      p->rank = r;
      p->rank_source = uint8_t(e.source);
      int32_t n;
      if (ParseInt(getenv(e.size), &n)) p->world_size = n;
      break;
    }
  }
  p->blocking_mode = uint8_t(c.blocking);
  p->exit_code = -1;
  p->mpi_thread_level = -1;
  p->proc_start_time = ProcStartTime();
  ReadBootId(p->boot_id);
  p->watchdog_timeout_ms = uint32_t(c.timeout_s * 1000.0);
  gethostname(p->host, sizeof(p->host) - 1);
  CopyString(p->job, sizeof(p->job), c.job.c_str());
  CopyString(p->step, sizeof(p->step), getenv("SLURM_STEP_ID"));
  ssize_t n = readlink("/proc/self/exe", p->exe, sizeof(p->exe) - 1);
  if (n > 0) p->exe[n] = '\0';
  n = ReadSmallFile("/proc/self/cmdline", p->cmdline, sizeof(p->cmdline));
  for (ssize_t i = 0; i + 1 < n; ++i) {
    if (p->cmdline[i] == '\0') p->cmdline[i] = ' ';
  }
  InitClock(&p->clock);
  p->heartbeat_mono_ns = uint64_t(MonotonicNs());
  p->heartbeat_real_ns = RealtimeNs();
  __atomic_store_n(&p->state, uint32_t(fmt::ProcState::kRunning), __ATOMIC_RELEASE);
}

// The folders trace files go to, opened so that nobody else can redirect
// them (like ssh-agent's and tmux's sockets): the per-user default folder in
// the shared /dev/shm must be a real folder, not a link, owned by us and
// closed to group and others; so must the job's subfolder, which the
// runtime makes itself (0700). A folder named by HANGTRACE_DIR may be
// reached through links the user set up, but must be ours and writable by
// no one else. Anything else: trace nothing, and say why (fail open).
// Returns an fd of the folder (O_DIRECTORY) or -1 with `err`.
int OpenTrustedDir(int parent, const std::string& name, const std::string& shown, bool follow, bool private_only,
                   std::string* err) {
  if (mkdirat(parent, name.c_str(), 0700) != 0 && errno != EEXIST) {
    *err = "cannot create folder " + shown + ": " + strerror(errno);
    return -1;
  }
  int fd = openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
  if (fd < 0) {
    *err = shown + (errno == ELOOP || errno == ENOTDIR ? " is not a folder of its own (a link, or a file): refused"
                                                       : std::string(": ") + strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
    *err = shown + " is not a folder";
  } else if (st.st_uid != geteuid()) {
    *err = shown + " belongs to uid " + std::to_string(st.st_uid) + ", not to this user: refused";
  } else if (st.st_mode & (private_only ? 077 : 022)) {
    char mode[8];
    snprintf(mode, sizeof(mode), "%03o", unsigned(st.st_mode & 0777));
    *err = shown + " has mode " + mode + (private_only ? ": group and others may enter it" : ": others may write in it") +
           "; refused (chmod 700 it, or remove it)";
  } else {
    return fd;
  }
  close(fd);
  return -1;
}

// mkdir -p for the folders above a HANGTRACE_DIR the user named (0700 when
// we create them); they are the user's choice and not checked.
bool MakeParents(const std::string& path, std::string* err) {
  for (size_t pos = path.find('/', 1); pos != std::string::npos; pos = path.find('/', pos + 1)) {
    const std::string cur = path.substr(0, pos);
    if (mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST) {
      *err = "cannot create folder " + cur + ": " + strerror(errno);
      return false;
    }
  }
  return true;
}

// The job's folder: DIR/JOB, both checked (OpenTrustedDir).
int OpenJobDir(const Config& c, std::string* err) {
  std::string base = c.dir;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  const bool named = getenv("HANGTRACE_DIR") && *getenv("HANGTRACE_DIR");
  if (!MakeParents(base, err)) return -1;
  int base_fd = OpenTrustedDir(AT_FDCWD, base, base, /*follow=*/named, /*private_only=*/!named, err);
  if (base_fd < 0) return -1;
  int job_fd = OpenTrustedDir(base_fd, c.job, base + "/" + c.job, false, true, err);
  close(base_fd);
  return job_fd;
}

// A file with our name already exists. If it is this very process before an
// exec (same pid, start time and boot) and holds nothing (no traced call,
// stack or signal: a shell before it exec'ed the program), it is removed and
// the name is free again (returns true); otherwise it is marked superseded
// so readers know. Async-signal-safe.
bool SupersedePredecessor(int dir_fd, const char* name, const fmt::ProcessInfo& me) {
  int fd = openat(dir_fd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return false;
  bool removable = false;
  fmt::FileHeader h;
  fmt::ProcessInfo p;
  const off_t off = pread(fd, &h, sizeof(h), 0) == ssize_t(sizeof(h)) &&
                            memcmp(h.magic, fmt::kMagic, 8) == 0 && h.ready == fmt::kReadyMagic
                        ? off_t(h.sections[fmt::kSecProcess].offset)
                        : 0;
  if (off > 0 && pread(fd, &p, sizeof(p), off) == ssize_t(sizeof(p)) && p.pid == me.pid &&
      p.proc_start_time == me.proc_start_time && memcmp(p.boot_id, me.boot_id, 16) == 0) {
    removable = h.counters.stack_count == 0 && h.counters.comm_count == 0 && p.signal == 0 && p.term_signal == 0 &&
                p.state == uint32_t(fmt::ProcState::kRunning);
    const off_t threads = off_t(h.sections[fmt::kSecThreads].offset);
    for (uint32_t i = 0; removable && i < h.counters.thread_count && i < fmt::kMaxThreads; ++i) {
      fmt::ThreadSlot t;
      if (pread(fd, &t, sizeof(t), threads + off_t(i) * off_t(sizeof(t))) != ssize_t(sizeof(t))) removable = false;
      else if (t.head != 0 && !(t.flags & fmt::kThreadTracer)) removable = false;
    }
    if (!removable) {
      uint32_t execed = uint32_t(fmt::ProcState::kExeced);
      (void)!pwrite(fd, &execed, sizeof(execed), off + off_t(offsetof(fmt::ProcessInfo, state)));
    }
  }
  close(fd);
  return removable && unlinkat(dir_fd, name, 0) == 0;
}

// Async-signal-safe string building for the file names.
size_t Append(char* buf, size_t at, size_t cap, const char* text) {
  while (*text && at + 1 < cap) buf[at++] = *text++;
  buf[at] = '\0';
  return at;
}
size_t AppendUint(char* buf, size_t at, size_t cap, uint64_t v) {
  char digits[24];
  int n = 0;
  do digits[n++] = char('0' + v % 10); while ((v /= 10) != 0);
  while (n > 0 && at + 1 < cap) buf[at++] = digits[--n];
  buf[at] = '\0';
  return at;
}

// Calls `attempt(name)` with the names a process's file may take in the
// folder `dir_fd`: STEM.htrace, then STEM.1.htrace, ... (STEM: host.pid).
// A name taken by this very process before an exec, with nothing in it, is
// freed and tried again (SupersedePredecessor). Returns the attempt's
// result (>= 0), or -1 with errno. Async-signal-safe when `attempt` is.
template <typename Attempt>
int TryNames(int dir_fd, const char* stem, const fmt::ProcessInfo& me, char* name, size_t cap, Attempt attempt) {
  for (int k = 0, tries = 0; k < 100 && tries < 200; ++k, ++tries) {
    size_t n = Append(name, 0, cap, stem);
    if (k > 0) n = AppendUint(name, Append(name, n, cap, "."), cap, uint64_t(k));
    Append(name, n, cap, ".htrace");
    const int result = attempt(name);
    if (result >= 0) return result;
    if (errno != EEXIST) return -1;
    if (SupersedePredecessor(dir_fd, name, me)) --k;  // its name is free again
  }
  errno = EEXIST;
  return -1;
}

// Opens a fresh file named after host and pid in the folder `dir_fd`
// (shown as `dir`); O_EXCL so two processes (or an exec'ed image and its
// predecessor) never share one, O_NOFOLLOW so a planted link is never used.
int OpenNewFile(int dir_fd, const std::string& dir, const char* stem, const fmt::ProcessInfo& me, char* path_out,
                size_t cap, std::string* err) {
  char name[256];
  const int fd = TryNames(dir_fd, stem, me, name, sizeof(name), [&](const char* n) {
    return openat(dir_fd, n, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  });
  snprintf(path_out, cap, "%s/%s", dir.c_str(), name);
  if (fd < 0) {
    *err = errno == EEXIST ? "too many trace files for pid " + std::to_string(me.pid) + " in " + dir
                           : std::string("cannot create ") + path_out + ": " + strerror(errno);
  }
  return fd;
}

// Whether the file is named at start: when asked to keep every file, and in
// a launcher's rank (a rank that hangs before its first MPI call is still
// seen). Every other process names it at its first traced call.
bool NameAtStart(const Config& c) {
  if (c.keep) return true;
  for (const RankVariable& e : kRankVariables) {
    if (e.source != fmt::RankSource::kEnvTorch && getenv(e.rank)) return true;
  }
  return getenv("RANK") && getenv("WORLD_SIZE");
}

// Lays out and maps a new trace file into `f`: anonymous (O_TMPFILE in the
// job's folder) until NameTraceFile, or named now when `named` or when the
// folder's filesystem has no O_TMPFILE. Everything up to the ring is
// allocated now (fallocate), so a full /dev/shm is an error here and never a
// SIGBUS in the traced program later; each lane is allocated on attach.
bool CreateTraceFile(const Config& c, TraceFile* f, bool named, std::string* err) {
  std::string dir = c.dir + "/" + c.job;
  const int dir_fd = OpenJobDir(c, err);
  if (dir_fd < 0) return false;

  fmt::ProcessInfo probe{};
  probe.pid = getpid();
  probe.proc_start_time = ProcStartTime();
  ReadBootId(probe.boot_id);
  gethostname(probe.host, sizeof(probe.host) - 1);
  snprintf(f->stem, sizeof(f->stem), "%s.%d", probe.host, probe.pid);
  int fd = named ? -1 : openat(dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0) {
    CopyString(f->path, sizeof(f->path), dir.c_str());
    f->naming = kAnonymous;
  } else {
    fd = OpenNewFile(dir_fd, dir, f->stem, probe, f->path, sizeof(f->path), err);
    if (fd < 0) {
      close(dir_fd);
      return false;
    }
    f->naming = kNamed;
  }
  auto fail = [&](const char* what, int code) {
    *err = std::string("cannot ") + what + " " + f->path + ": " + strerror(code);
    if (f->naming == kNamed) unlink(f->path);
    close(fd);
    close(dir_fd);
    return false;
  };

  fmt::Capacities caps;
  caps.lane_slots = c.ring_slots;
  const fmt::Layout layout = fmt::LayOut(caps);
  const fmt::Section* sections = layout.sections;
  const uint64_t size = layout.file_size;
  const uint64_t tables_end = layout.prealloc_end;

  if (ftruncate(fd, off_t(size)) != 0) return fail("size", errno);
  int rc = posix_fallocate(fd, 0, off_t(tables_end));
  if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) return fail("allocate", rc);
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) return fail("map", errno);

  f->base = static_cast<uint8_t*>(base);
  f->size = size;
  f->fd = fd;
  f->dir_fd = dir_fd;
  f->header = reinterpret_cast<fmt::FileHeader*>(base);
  auto at = [&](int s) { return f->base + sections[s].offset; };
  f->process = reinterpret_cast<fmt::ProcessInfo*>(at(fmt::kSecProcess));
  f->calls = reinterpret_cast<fmt::CallInfo*>(at(fmt::kSecCalls));
  f->comms = reinterpret_cast<fmt::CommEntry*>(at(fmt::kSecComms));
  f->members = reinterpret_cast<int32_t*>(at(fmt::kSecMembers));
  f->threads = reinterpret_cast<fmt::ThreadSlot*>(at(fmt::kSecThreads));
  f->stacks = reinterpret_cast<fmt::StackSlot*>(at(fmt::kSecStacks));
  f->ring = reinterpret_cast<fmt::Record*>(at(fmt::kSecRing));
  f->names = reinterpret_cast<fmt::NameEntry*>(at(fmt::kSecNames));
  f->modules = reinterpret_cast<fmt::ModuleEntry*>(at(fmt::kSecModules));
  f->pyframes = reinterpret_cast<fmt::PyFrame*>(at(fmt::kSecPyFrames));
  f->lane_slots = c.ring_slots;
  f->thread_capacity = fmt::kMaxThreads;

  fmt::FillHeader(f->header, layout, c.ring_slots,
                  (g_clock_is_tsc ? uint64_t(fmt::kFeatTscClock) : 0) | (c.stacks ? uint64_t(fmt::kFeatStacks) : 0));
  FillProcessInfo(f->process, c);
  fmt::FileHeader* h = f->header;
  __atomic_store_n(&h->ready, fmt::kReadyMagic, __ATOMIC_RELEASE);
  return true;
}

// Links the anonymous file `f` as `name` in its folder. AT_EMPTY_PATH
// needs CAP_DAC_READ_SEARCH; /proc/self/fd works for anyone.
bool LinkAs(const TraceFile* f, const char* name) {
  if (linkat(f->fd, "", f->dir_fd, name, AT_EMPTY_PATH) == 0) return true;
  if (errno == EEXIST) return false;
  char proc[64];
  AppendUint(proc, Append(proc, 0, sizeof(proc), "/proc/self/fd/"), sizeof(proc), uint64_t(f->fd));
  return linkat(AT_FDCWD, proc, f->dir_fd, name, AT_SYMLINK_FOLLOW) == 0;
}

// The file's name within its folder (after NameTraceFile).
const char* BaseName(const TraceFile* f) {
  const char* slash = strrchr(f->path, '/');
  return slash ? slash + 1 : f->path;
}

// Why this process is not traced, on stderr once per process lineage: a
// job that forks or execs thousands of times (a shell loop) prints one line,
// not thousands. Children learn it from the environment (exec) or memory.
constexpr const char* kSaidVar = "HANGTRACE_NOT_TRACING_SAID";
bool g_said_not_tracing = false;
void SayNotTracing(const char* why) {
  if (g_said_not_tracing || getenv(kSaidVar)) return;
  g_said_not_tracing = true;
  WriteStderrLine((std::string("hangtrace: ") + why + " (said once for this process and its children)").c_str());
  setenv(kSaidVar, "1", 1);
}

void ReleaseThreadSlot(void* p) {
  auto* s = static_cast<fmt::ThreadSlot*>(p);
  // Only release a slot of the current file (not one inherited over fork).
  if (!g_trace || s < g_trace->threads || s >= g_trace->threads + g_trace->thread_capacity) return;
  SeqBegin(&s->version);
  s->current.kind = uint8_t(fmt::EventKind::kEmpty);
  SeqEnd(&s->version);
  __atomic_store_n(&s->tid, 0u, __ATOMIC_RELEASE);
  t_thread.slot = nullptr;
  ReleaseAltStack();
}

void OnExit(int status, void*) { RecordExit(status); }

// In the child after fork(): the parent's mapping is shared with the parent,
// so the child must never write it again. Give the child its own file (with
// the call table, so its records decode) and its own background thread.
void AtForkChild() {
  TraceFile* parent = g_trace;
  __atomic_store_n(&g_trace, static_cast<TraceFile*>(nullptr), __ATOMIC_RELEASE);
  __atomic_fetch_add(&g_generation, 1, __ATOMIC_RELEASE);
  pthread_mutex_init(&g_table_lock, nullptr);
  if (!parent) return;

  // The parent's tables, copied before we unmap its file.
  static fmt::CallInfo calls[fmt::kMaxCalls];
  uint32_t ncalls = __atomic_load_n(&parent->header->counters.call_count, __ATOMIC_ACQUIRE);
  if (ncalls > fmt::kMaxCalls) ncalls = fmt::kMaxCalls;
  memcpy(calls, parent->calls, ncalls * sizeof(fmt::CallInfo));
  int32_t parent_rank = parent->process->rank;
  int32_t parent_world = parent->process->world_size;
  int32_t parent_pid = parent->process->pid;
  munmap(parent->base, parent->size);
  close(parent->fd);
  close(parent->dir_fd);

  TraceFile* f = &g_file_storage;
  *f = TraceFile{};
  std::string err;
  if (!CreateTraceFile(Settings(), f, NameAtStart(Settings()), &err)) {
    SayNotTracing(("fork child " + std::to_string(getpid()) + " runs untraced: " + err).c_str());
    return;
  }
  memcpy(f->calls, calls, ncalls * sizeof(fmt::CallInfo));
  __atomic_store_n(&f->header->counters.call_count, ncalls, __ATOMIC_RELEASE);
  f->process->forked = 1;
  f->process->parent_pid = parent_pid;
  f->process->rank = parent_rank;
  f->process->world_size = parent_world;
  f->process->rank_source = uint8_t(fmt::RankSource::kInherited);
  __atomic_store_n(&g_trace, f, __ATOMIC_RELEASE);
  StartBackgroundThread();
}

}  // namespace

const Config& RuntimeConfig() { return Settings(); }

bool AttachThread(ThreadState& t) {
  uint32_t gen = __atomic_load_n(&g_generation, __ATOMIC_ACQUIRE);
  TraceFile* f = __atomic_load_n(&g_trace, __ATOMIC_ACQUIRE);
  t.generation = gen;
  t.slot = nullptr;
  if (!f) return false;
  t.tid = int32_t(syscall(SYS_gettid));
  // First a slot never used, then one an exited thread released: the lane of
  // an exited thread keeps its history until slots run out.
  auto claim = [&](bool never_used_only) -> int64_t {
    for (uint32_t i = 0; i < f->thread_capacity; ++i) {
      fmt::ThreadSlot* s = &f->threads[i];
      if (never_used_only && __atomic_load_n(&s->head, __ATOMIC_ACQUIRE) != 0) continue;
      uint32_t expected = 0;
      if (__atomic_compare_exchange_n(&s->tid, &expected, uint32_t(t.tid), false, __ATOMIC_ACQ_REL,
                                      __ATOMIC_RELAXED)) {
        return i;
      }
    }
    return -1;
  };
  int64_t claimed = claim(true);
  if (claimed < 0) claimed = claim(false);
  if (claimed >= 0) {
    const uint32_t i = uint32_t(claimed);
    fmt::ThreadSlot* s = &f->threads[i];
    // Allocate the lane now so that a full /dev/shm leaves this thread
    // untraced instead of raising SIGBUS on its first record.
    const uint64_t lane_bytes = uint64_t(f->lane_slots) * sizeof(fmt::Record);
    const uint64_t lane_off = f->header->sections[fmt::kSecRing].offset + i * lane_bytes;
    int rc = posix_fallocate(f->fd, off_t(lane_off), off_t(lane_bytes));
    if (rc != 0 && rc != EOPNOTSUPP && rc != EINVAL) {
      __atomic_store_n(&s->tid, 0u, __ATOMIC_RELEASE);
      __atomic_fetch_add(&f->header->counters.dropped, 1, __ATOMIC_RELAXED);
      return false;
    }
    uint32_t* hw = &f->header->counters.thread_count;
    uint32_t cur = __atomic_load_n(hw, __ATOMIC_RELAXED);
    while (cur < i + 1 && !__atomic_compare_exchange_n(hw, &cur, i + 1, true, __ATOMIC_RELEASE,
                                                       __ATOMIC_RELAXED)) {
    }
    s->flags = t.tracer_thread ? uint32_t(fmt::kThreadTracer) : 0u;
    if (!t.tracer_thread) {
      __atomic_store_n(&f->program_called, 1u, __ATOMIC_RELEASE);
      NameTraceFile();
      if (RuntimeConfig().stacks) EnsureAltStack();
    }
    prctl(PR_GET_NAME, s->name, 0, 0, 0);
    t.slot = s;
    t.lane = f->ring + uint64_t(i) * f->lane_slots;
    t.lane_mask = f->lane_slots - 1;
    pthread_setspecific(g_thread_key, s);
    return true;
  }
  __atomic_fetch_add(&f->header->counters.dropped, 1, __ATOMIC_RELAXED);
  return false;
}

void NotePolling(fmt::Record& r) {
  ThreadState& t = t_thread;
  if (t.depth != 0) return;
  if (t.generation != __atomic_load_n(&g_generation, __ATOMIC_RELAXED) && !AttachThread(t)) return;
  fmt::ThreadSlot* s = t.slot;
  if (!s) return;
  // Still polling, whichever call and request (a loop that alternates
  // MPI_Test on its receive and on its send, as hpcc's RandomAccess does,
  // waits since its first poll that retired nothing): nothing to publish.
  if (t.poll_ticks && s->current.kind == uint8_t(fmt::EventKind::kBegin) && s->current.ticks == t.poll_ticks) {
    return;
  }
  r.ticks = NowTicks();
  r.tid = uint32_t(t.tid);
  r.kind = uint8_t(fmt::EventKind::kBegin);
  SeqBegin(&s->version);
  s->current = r;
  SeqEnd(&s->version);
  t.poll_ticks = r.ticks;
}

void EndPolling() {
  ThreadState& t = t_thread;
  fmt::ThreadSlot* s = t.slot;
  if (!t.poll_ticks || !s || t.generation != __atomic_load_n(&g_generation, __ATOMIC_RELAXED)) return;
  if (s->current.kind == uint8_t(fmt::EventKind::kBegin) && s->current.ticks == t.poll_ticks) {
    SeqBegin(&s->version);
    s->current.kind = uint8_t(fmt::EventKind::kEmpty);
    SeqEnd(&s->version);
  }
  t.poll_ticks = 0;
}

bool RecordEvent(fmt::Record& r, fmt::EventKind kind) {
  ThreadState& t = t_thread;
  if (t.generation != __atomic_load_n(&g_generation, __ATOMIC_RELAXED) && !AttachThread(t)) {
    return false;
  }
  if (!t.slot) return false;
  r.ticks = NowTicks();
  if (!r.tid) r.tid = uint32_t(t.tid);
  r.kind = uint8_t(kind);
  LaneWrite(t.lane, t.lane_mask, &t.slot->head, r);
  return true;
}

namespace {
// Point-to-point sequence numbers: a lock-free table keyed by
// (comm, peer, tag, direction), shared by the MPI and NCCL wrappers.

struct P2pSlot {
  uint64_t key;
  uint64_t count;
};
constexpr uint64_t kP2pEmpty = 0;
constexpr size_t kP2pSize = 1 << 16;
P2pSlot g_p2p[kP2pSize];

}  // namespace

uint64_t NextP2pSeq(uint16_t comm, int32_t peer, int32_t tag, bool send) {
  // Sends and receives count apart: with two ranks, a send to and a receive
  // from the same peer on the same tag are different streams.
  uint64_t key = Combine(Combine(Combine(uint64_t(comm) + 1, uint64_t(uint32_t(peer))), uint64_t(uint32_t(tag))),
                         send ? 1 : 2);
  if (key < 3) key += 3;
  for (size_t i = key & (kP2pSize - 1), n = 0; n < kP2pSize; i = (i + 1) & (kP2pSize - 1), ++n) {
    uint64_t k = __atomic_load_n(&g_p2p[i].key, __ATOMIC_ACQUIRE);
    if (k == kP2pEmpty) {
      uint64_t expected = kP2pEmpty;
      if (__atomic_compare_exchange_n(&g_p2p[i].key, &expected, key, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        k = key;
      } else {
        k = expected;
      }
    }
    if (k == key) return __atomic_add_fetch(&g_p2p[i].count, 1, __ATOMIC_RELAXED);
  }
  return 0;  // table full: unknown
}

uint32_t InternName(const char* text) {
  TraceFile* f = g_trace;
  if (!f || !text) return 0;
  pthread_mutex_lock(&g_table_lock);
  uint32_t n = f->header->counters.name_count;
  uint32_t found = 0;
  for (uint32_t i = 0; i < n && !found; ++i) {
    if (strncmp(f->names[i].text, text, sizeof(f->names[i].text) - 1) == 0) found = i + 1;
  }
  if (!found && n < f->header->sections[fmt::kSecNames].count) {
    CopyString(f->names[n].text, sizeof(f->names[n].text), text);
    __atomic_store_n(&f->header->counters.name_count, n + 1, __ATOMIC_RELEASE);
    found = n + 1;
  }
  pthread_mutex_unlock(&g_table_lock);
  return found;
}

uint16_t RegisterCall(const char* name, fmt::Api api, fmt::Op op, uint8_t flags) {
  TraceFile* f = g_trace;
  if (!f) return fmt::kNoCall;
  pthread_mutex_lock(&g_table_lock);
  uint32_t n = f->header->counters.call_count;
  uint16_t index = fmt::kNoCall;
  for (uint32_t i = 0; i < n; ++i) {
    // A name is stored cut to the field (CopyString keeps cap - 1 bytes):
    // compared the same way, a long name matches itself.
    if (strncmp(f->calls[i].name, name, sizeof(f->calls[i].name) - 1) == 0) {
      index = uint16_t(i);
      break;
    }
  }
  if (index == fmt::kNoCall && n < fmt::kMaxCalls) {
    fmt::CallInfo* c = &f->calls[n];
    CopyString(c->name, sizeof(c->name), name);
    c->api = uint8_t(api);
    c->op = uint8_t(op);
    c->flags = flags;
    __atomic_store_n(&f->header->counters.call_count, n + 1, __ATOMIC_RELEASE);
    index = uint16_t(n);
  }
  pthread_mutex_unlock(&g_table_lock);
  return index;
}

uint16_t RegisterComm(const CommDesc& d) {
  TraceFile* f = g_trace;
  if (!f) return fmt::kNoComm;
  fmt::Counters& k = f->header->counters;
  uint32_t index = __atomic_fetch_add(&k.comm_count, 1, __ATOMIC_ACQ_REL);
  if (index >= fmt::kMaxComms) {
    __atomic_store_n(&k.comm_count, fmt::kMaxComms, __ATOMIC_RELEASE);
    __atomic_fetch_add(&k.dropped, 1, __ATOMIC_RELAXED);
    return fmt::kNoComm;
  }
  fmt::CommEntry* e = &f->comms[index];
  SeqBegin(&e->version);
  e->kind = uint8_t(d.kind);
  e->flags = d.flags & uint8_t(~fmt::kCommMembersKnown);
  e->creator_call = d.creator_call;
  e->id = d.id;
  e->parent_id = d.parent_id;
  e->size = d.size;
  e->my_index = d.my_index;
  e->color = d.color;
  e->key = d.key;
  e->parent_counter = d.parent_counter;
  e->handle = d.handle;
  e->device = d.device;
  CopyString(e->label, sizeof(e->label), d.label);
  if (d.members && d.size > 0) {
    uint32_t start = __atomic_fetch_add(&k.member_count, uint32_t(d.size), __ATOMIC_ACQ_REL);
    if (uint64_t(start) + uint32_t(d.size) <= fmt::kMaxMembers) {
      memcpy(&f->members[start], d.members, size_t(d.size) * sizeof(int32_t));
      e->members_offset = start;
      e->flags |= fmt::kCommMembersKnown;
    }
  }
  SeqEnd(&e->version);
  return uint16_t(index);
}

void SetCommLabel(uint16_t comm, const char* label) {
  TraceFile* f = g_trace;
  if (!f || comm >= fmt::kMaxComms) return;
  fmt::CommEntry* e = &f->comms[comm];
  SeqBegin(&e->version);
  CopyString(e->label, sizeof(e->label), label);
  SeqEnd(&e->version);
}

void MarkCommFreed(uint16_t comm) {
  TraceFile* f = g_trace;
  if (!f || comm >= fmt::kMaxComms) return;
  fmt::CommEntry* e = &f->comms[comm];
  SeqBegin(&e->version);
  e->flags |= fmt::kCommFreed;
  SeqEnd(&e->version);
}

uint32_t NextChildCounter(uint16_t comm) {
  TraceFile* f = g_trace;
  if (!f || comm >= fmt::kMaxComms) return 0;
  return __atomic_add_fetch(&f->comms[comm].children, 1, __ATOMIC_ACQ_REL);
}

void SetRank(int32_t rank, int32_t world_size, fmt::RankSource source) {
  TraceFile* f = g_trace;
  if (!f) return;
  f->process->rank = rank;
  f->process->world_size = world_size;
  f->process->rank_source = uint8_t(source);
}

bool NameTraceFile() {
  TraceFile* f = __atomic_load_n(&g_trace, __ATOMIC_ACQUIRE);
  if (!f) return false;
  uint32_t state = kAnonymous;
  if (!__atomic_compare_exchange_n(&f->naming, &state, uint32_t(kNaming), false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE)) {
    return state == kNamed;  // named, or another thread is naming it now
  }
  char name[256];
  if (TryNames(f->dir_fd, f->stem, *f->process, name, sizeof(name),
               [f](const char* n) { return LinkAs(f, n) ? 0 : -1; }) == 0) {
    Append(f->path, Append(f->path, strlen(f->path), sizeof(f->path), "/"), sizeof(f->path), name);
    __atomic_store_n(&f->naming, uint32_t(kNamed), __ATOMIC_RELEASE);
    return true;
  }
  return false;  // left in kNaming: not retried on every call
}

void RecordExit(int code) {
  TraceFile* f = __atomic_load_n(&g_trace, __ATOMIC_ACQUIRE);
  if (!f) return;
  fmt::ProcessInfo* p = f->process;
  // A vfork child shares our memory but is not us (and runs no atfork).
  if (p->pid != int32_t(syscall(SYS_getpid))) return;
  if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != uint32_t(fmt::ProcState::kRunning)) return;
  UpdateClock(&p->clock);
  p->exit_code = code;
  p->end_ticks = NowTicks();
  __atomic_store_n(&p->state, uint32_t(fmt::ProcState::kExited), __ATOMIC_RELEASE);
  // Nothing of interest (a rank's file named at start, or HANGTRACE_KEEP
  // not asked): no traced call, no stack, no signal, a clean exit. Removed
  // only if the name still holds this very file.
  if (code != 0 || Settings().keep || __atomic_load_n(&f->naming, __ATOMIC_ACQUIRE) != kNamed ||
      __atomic_load_n(&f->program_called, __ATOMIC_ACQUIRE) ||
      __atomic_load_n(&f->header->counters.stack_count, __ATOMIC_ACQUIRE) != 0 || p->term_signal != 0 ||
      p->signal != 0) {
    return;
  }
  struct stat mine, named;
  if (fstat(f->fd, &mine) == 0 && fstatat(f->dir_fd, BaseName(f), &named, AT_SYMLINK_NOFOLLOW) == 0 &&
      mine.st_ino == named.st_ino && mine.st_dev == named.st_dev) {
    unlinkat(f->dir_fd, BaseName(f), 0);
  }
}

bool StartRuntime(const Config& config) {
  Settings() = config;
  if (config.off) return false;
  if (!config.errors.empty()) WriteStderrLine(("hangtrace: " + config.errors).c_str());
  g_clock_is_tsc = DetectInvariantTsc();

  TraceFile* f = &g_file_storage;
  std::string err;
  if (!CreateTraceFile(config, f, NameAtStart(config), &err)) {
    SayNotTracing(("not tracing pid " + std::to_string(getpid()) + ": " + err).c_str());
    return false;
  }
  if (!g_once_done) {
    g_once_done = true;
    pthread_key_create(&g_thread_key, ReleaseThreadSlot);
    pthread_atfork(nullptr, nullptr, AtForkChild);
    on_exit(OnExit, nullptr);
  }
  __atomic_store_n(&g_trace, f, __ATOMIC_RELEASE);
  __atomic_fetch_add(&g_generation, 1, __ATOMIC_RELEASE);
  if (config.stacks) InstallSignalHandlers();
  StartBackgroundThread();
  return true;
}

void WriteStderrLine(const char* line) {
  // write(2), not stdio: the stderr FILE lock may be held by a hung thread.
  size_t n = strlen(line);
  char buf[1024];
  if (n > sizeof(buf) - 2) n = sizeof(buf) - 2;
  memcpy(buf, line, n);
  buf[n++] = '\n';
  size_t off = 0;
  while (off < n) {
    ssize_t w = write(STDERR_FILENO, buf + off, n - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += size_t(w);
  }
}

}  // namespace hangtrace
