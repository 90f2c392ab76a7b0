// The trace file itself: the folder it goes to (created and checked so that
// nobody else can redirect it), its name (anonymous until the process has
// something to say, then host.pid.htrace, never sharing a name), its layout
// and mapping, and the process facts written when it is made. The tables
// and the life cycle of a traced process are in runtime.cc.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tracer/internal.h"
#include "tracer/procfs.h"
#include "tracer/runtime.h"

namespace hangtrace {

void CopyString(char* dst, size_t cap, const char* src) {
  if (!src) src = "";
  size_t n = strnlen(src, cap - 1);
  memcpy(dst, src, n);
  dst[n] = '\0';
}

namespace {

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

// The rank and world size the launcher's variables give (-1: none), and
// which variable said it.
fmt::RankSource RankFromEnvironment(int32_t* rank, int32_t* world_size) {
  *rank = *world_size = -1;
  for (const RankVariable& e : kRankVariables) {
    if (ParseInt(getenv(e.rank), rank)) {
      if (!ParseInt(getenv(e.size), world_size)) *world_size = -1;
      return e.source;
    }
  }
  *rank = -1;
  return fmt::RankSource(0);
}

void FillProcessInfo(fmt::ProcessInfo* p, const Config& c) {
  p->pid = getpid();
  p->ppid = getppid();
  const fmt::RankSource source = RankFromEnvironment(&p->rank, &p->world_size);
  if (p->rank >= 0) p->rank_source = uint8_t(source);
  p->blocking_mode = uint8_t(c.blocking);
  p->exit_code = -1;
  p->mpi_thread_level = -1;
  p->proc_start_time = ProcStartTime();
  ReadBootId(p->boot_id);
  p->watchdog_timeout_ms = uint32_t(c.timeout_s * 1000.0);
  gethostname(p->host, sizeof(p->host) - 1);
  CopyString(p->job, sizeof(p->job), c.job.c_str());
  CopyString(p->step, sizeof(p->step), getenv("SLURM_STEP_ID"));
  CopyString(p->run, sizeof(p->run), c.run.c_str());
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
  std::string base = ExpandUser(c.dir);
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

}  // namespace

namespace {
// Whether the parent process has `name`=`value` in its environment: then
// this process inherited its rank variable from the rank (a data-loader
// worker, a multiprocessing spawn, a shell's child) and is not the rank
// itself. A launcher (mpirun's daemon, slurmstepd, torchrun) does not hold
// the rank variable it gives its ranks.
bool ParentHasSame(const char* name, const char* value) {
  char path[48];
  snprintf(path, sizeof(path), "/proc/%d/environ", int(getppid()));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const size_t name_len = strlen(name), value_len = strlen(value);
  char buf[8192];
  size_t have = 0;
  bool found = false;
  for (;;) {
    const ssize_t n = read(fd, buf + have, sizeof(buf) - have);
    if (n <= 0) break;
    have += size_t(n);
    size_t start = 0;
    for (size_t i = 0; i < have && !found; ++i) {
      if (buf[i] != '\0') continue;
      const char* e = buf + start;
      found = i - start == name_len + 1 + value_len && memcmp(e, name, name_len) == 0 && e[name_len] == '=' &&
              memcmp(e + name_len + 1, value, value_len) == 0;
      start = i + 1;
    }
    if (found) break;
    if (start == 0 && have == sizeof(buf)) have = 0;  // an entry longer than the buffer: not ours
    memmove(buf, buf + start, have - start);
    have -= start;
  }
  close(fd);
  return found;
}
}  // namespace

// Whether the file is named at start: when asked to keep every file, and in
// a launcher's rank (a rank that hangs before its first MPI call is still
// seen), not in a child that inherited the rank's variables. Every other
// process names it at its first traced call.
bool NameAtStart(const Config& c) { return c.keep || LaunchedRank(); }

// A rank as its launcher started it (its variables are its own, not a
// parent's it inherited).
bool LaunchedRank() {
  for (const RankVariable& e : kRankVariables) {
    if (e.source == fmt::RankSource::kEnvTorch) continue;
    if (const char* v = getenv(e.rank)) return !ParentHasSame(e.rank, v);
  }
  const char* rank = getenv("RANK");
  return rank && getenv("WORLD_SIZE") && !ParentHasSame("RANK", rank);
}

namespace {
// A rank the storage had no room for leaves an empty file named for it,
// "host.pid.rank3of8.no-room" (a name needs no room, only an inode), so
// that the analysis knows the rank was started and is untraced, and why,
// instead of reading its missing file as a rank that never started or
// whose node is gone. Best effort: a folder out of inodes takes nothing.
void LeaveNoRoomMarker(int dir_fd, const char* stem) {
  int32_t rank, world_size;
  RankFromEnvironment(&rank, &world_size);
  if (rank < 0) return;
  char name[256];
  size_t at = Append(name, 0, sizeof(name), stem);
  at = AppendUint(name, Append(name, at, sizeof(name), ".rank"), sizeof(name), uint64_t(rank));
  if (world_size > 0) at = AppendUint(name, Append(name, at, sizeof(name), "of"), sizeof(name), uint64_t(world_size));
  Append(name, at, sizeof(name), fmt::kNoRoomSuffix);
  int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd >= 0) close(fd);
}
}  // namespace

// Lays out and maps a new trace file into `f`: anonymous (O_TMPFILE in the
// job's folder) until NameTraceFile, or named now when `named` or when the
// folder's filesystem has no O_TMPFILE. Everything up to the ring is
// allocated now (fallocate), so a full /dev/shm is an error here and never a
// SIGBUS in the traced program later; each lane is allocated on attach.
bool CreateTraceFile(const Config& c, TraceFile* f, bool named, std::string* err) {
  std::string dir = ExpandUser(c.dir) + "/" + c.job;
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
    if ((code == ENOSPC || code == EDQUOT) && LaunchedRank()) LeaveNoRoomMarker(dir_fd, f->stem);
    close(fd);
    close(dir_fd);
    return false;
  };

  fmt::Capacities caps;  // the default capacities, which NextCollSeq counts on
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
                  uint64_t(fmt::kFeatCallPositions) | (g_clock_is_tsc ? uint64_t(fmt::kFeatTscClock) : 0) |
                      (c.stacks ? uint64_t(fmt::kFeatStacks) : 0));
  FillProcessInfo(f->process, c);
  fmt::FileHeader* h = f->header;
  __atomic_store_n(&h->ready, fmt::kReadyMagic, __ATOMIC_RELEASE);
  return true;
}

namespace {
// Links the anonymous file `f` as `name` in its folder. AT_EMPTY_PATH
// needs CAP_DAC_READ_SEARCH; /proc/self/fd works for anyone.
bool LinkAs(const TraceFile* f, const char* name) {
  if (linkat(f->fd, "", f->dir_fd, name, AT_EMPTY_PATH) == 0) return true;
  if (errno == EEXIST) return false;
  char proc[64];
  AppendUint(proc, Append(proc, 0, sizeof(proc), "/proc/self/fd/"), sizeof(proc), uint64_t(f->fd));
  return linkat(AT_FDCWD, proc, f->dir_fd, name, AT_SYMLINK_FOLLOW) == 0;
}

}  // namespace

const char* TraceFileBaseName(const TraceFile* f) {
  const char* slash = strrchr(f->path, '/');
  return slash ? slash + 1 : f->path;
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

}  // namespace hangtrace
