// Native stacks captured inside the process, and fatal signals recorded.
//
// Capture: the background thread claims one StackSlot per thread of the
// process (from /proc/self/task), marks it pending and sends that thread
// kStackSignal with tgkill. The handler, on the target thread, unwinds from
// the interrupted context with libunwind (unw_init_local2 on the ucontext;
// unw_step is documented async-signal-safe for the local address space)
// straight into the mapped file, then marks the slot done. Frames are raw
// program counters: the analyzer names them from the module map (written
// with the round) and the files on disk, with libdw, which knows static
// functions and lines where the nearest dynamic symbol does not. A thread
// that never answers (signal blocked, D state) stays pending: the reader
// reports it as such, and `hangtrace dump` can still read it from outside.
//
// In a Python process the threads that answered stay in the handler until
// CPython has dumped their Python frames (python.cc), so that nothing moves
// while it reads them and both stacks are of one instant; a held thread
// waits at most kHoldLimitNs.
//
// Fatal signals: the handler writes the signal into ProcessInfo first (so the
// fact survives even if unwinding a corrupt stack faults), then the faulting
// thread's stack and the module map, then hands the signal to whatever
// handler was there before.
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <dirent.h>
#include <dlfcn.h>
#include <linux/futex.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <pthread.h>
#include <time.h>

#include "tracer/file_locks.h"
#include "tracer/internal.h"
#include "tracer/procfs.h"
#include "tracer/python.h"
#include "tracer/runtime.h"

namespace hangtrace {
namespace {

volatile int g_in_crash = 0;

int GetTid() { return int(syscall(SYS_gettid)); }

// The round whose answered threads stay in the handler (0: none).
uint32_t g_hold_round = 0;
constexpr int64_t kHoldLimitNs = 1000 * 1000000ll;

int64_t MonoNs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// libunwind's local unwinder, loaded when the process makes its trace file
// (LoadUnwinder), not with this library: a process that never traces never
// maps it, nor the liblzma it needs (an eighth of a process's start). Its
// entry points by their exported names (the header's macros spell them,
// _ULx86_64_step on x86-64).
#define HT_NAME_OF(x) #x
#define HT_EXPORTED_NAME(x) HT_NAME_OF(x)
struct Unwinder {
  int (*init_local2)(unw_cursor_t*, unw_context_t*, int);
  int (*get_reg)(unw_cursor_t*, unw_regnum_t, unw_word_t*);
  int (*step)(unw_cursor_t*);
  int (*is_signal_frame)(unw_cursor_t*);
};
Unwinder g_unwinder;  // every entry set, or none

// Unwinds from `uc` (a signal's ucontext) into `slot`. Async-signal-safe.
void UnwindInto(fmt::StackSlot* slot, void* uc) {
  unw_cursor_t cursor;
  uint32_t n = 0;
  bool truncated = false;
  slot->pthread_id = uint64_t(pthread_self());
  const Unwinder& u = g_unwinder;
  if (u.init_local2 && u.init_local2(&cursor, static_cast<unw_context_t*>(uc), UNW_INIT_SIGNAL_FRAME) == 0) {
    // The interrupted pc is exact; a caller's is a return address, which
    // may already belong to the next line or function: step back into the
    // call. Below a signal frame the pc is exact again.
    bool exact = true;
    do {
      if (n == fmt::kMaxFrames) {
        truncated = true;
        break;
      }
      unw_word_t ip = 0;
      u.get_reg(&cursor, UNW_REG_IP, &ip);
      fmt::StackFrame& f = slot->frames[n];
      f.pc = exact || ip == 0 ? ip : ip - 1;
      f.offset = 0;
      f.symbol[0] = '\0';
      exact = u.is_signal_frame(&cursor) > 0;
      ++n;
    } while (u.step(&cursor) > 0);
  }
  slot->nframes = n;
  slot->ticks = NowTicks();
  __atomic_store_n(&slot->status,
                   uint32_t(truncated ? fmt::StackStatus::kTruncated : fmt::StackStatus::kDone),
                   __ATOMIC_RELEASE);
}

}  // namespace

bool LoadUnwinder(std::string* err) {
  if (g_unwinder.init_local2) return true;
  void* lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    *err = why ? why : "libunwind.so.8 not found";
    return false;
  }
  Unwinder u;
  u.init_local2 = reinterpret_cast<decltype(u.init_local2)>(dlsym(lib, HT_EXPORTED_NAME(unw_init_local2)));
  u.get_reg = reinterpret_cast<decltype(u.get_reg)>(dlsym(lib, HT_EXPORTED_NAME(unw_get_reg)));
  u.step = reinterpret_cast<decltype(u.step)>(dlsym(lib, HT_EXPORTED_NAME(unw_step)));
  u.is_signal_frame = reinterpret_cast<decltype(u.is_signal_frame)>(dlsym(lib, HT_EXPORTED_NAME(unw_is_signal_frame)));
  if (!u.init_local2 || !u.get_reg || !u.step || !u.is_signal_frame) {
    *err = "libunwind.so.8 lacks unw_init_local2 (libunwind 1.3 or newer is needed)";
    return false;
  }
  g_unwinder = u;
  return true;
}

void StackSignalHandler(int, siginfo_t*, void* uc) {
  int saved_errno = errno;
  TraceFile* f = __atomic_load_n(&g_trace, __ATOMIC_ACQUIRE);
  if (f) {
    int tid = GetTid();
    uint32_t count = __atomic_load_n(&f->header->counters.stack_count, __ATOMIC_ACQUIRE);
    uint32_t round = __atomic_load_n(&f->header->counters.stack_round, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < count && i < fmt::kMaxStacks; ++i) {
      fmt::StackSlot* s = &f->stacks[i];
      if (s->tid == uint32_t(tid) && s->round == round &&
          __atomic_load_n(&s->status, __ATOMIC_ACQUIRE) == uint32_t(fmt::StackStatus::kPending)) {
        UnwindInto(s, uc);
        break;
      }
    }
    // Held until the round's Python frames are read (see the top): asleep
    // on a futex, so that held threads leave the CPU to the reader.
    const int64_t until = MonoNs() + kHoldLimitNs;
    for (int64_t now; round != 0 && __atomic_load_n(&g_hold_round, __ATOMIC_ACQUIRE) == round &&
                      (now = MonoNs()) < until;) {
      struct timespec left = {time_t((until - now) / 1000000000), long((until - now) % 1000000000)};
      syscall(SYS_futex, &g_hold_round, FUTEX_WAIT_PRIVATE, round, &left, nullptr, 0);
    }
  }
  errno = saved_errno;
}

namespace {

// Parses one line of /proc/self/maps into `m` when it maps a file
// executable. Async-signal-safe.
bool ParseMapsLine(const char* l, const char* end, fmt::ModuleEntry* m) {
  auto hex = [&](uint64_t* out) {
    uint64_t v = 0;
    bool any = false;
    for (; l < end; ++l) {
      char c = *l;
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) break;
      v = v * 16 + uint64_t(d);
      any = true;
    }
    *out = v;
    return any;
  };
  uint64_t start, stop, offset;
  if (!hex(&start) || l >= end || *l++ != '-' || !hex(&stop) || l + 6 > end || *l++ != ' ') return false;
  const bool exec = l[2] == 'x';
  l += 4;
  if (l >= end || *l++ != ' ' || !hex(&offset)) return false;
  for (int field = 0; field < 2; ++field) {  // device, inode
    while (l < end && *l == ' ') ++l;
    while (l < end && *l != ' ') ++l;
  }
  while (l < end && *l == ' ') ++l;
  if (!exec || l >= end || *l != '/') return false;
  size_t n = size_t(end - l);
  if (n >= sizeof(m->path)) return false;  // a cut path would name another file
  m->start = start;
  m->end = stop;
  m->file_offset = offset;
  memcpy(m->path, l, n);
  m->path[n] = '\0';
  return true;
}

// Writes the executable file mappings of the process into the module table
// for `round`. Async-signal-safe (raw syscalls, no allocation), so the crash
// handler uses it too.
void CaptureModules(TraceFile* f, uint32_t round) {
  const fmt::Section& sec = f->header->sections[fmt::kSecModules];
  if (!f->modules || sec.count == 0) return;
  if (!f->modules_allocated) {
    if (syscall(SYS_fallocate, f->fd, 0, off_t(sec.offset), off_t(uint64_t(sec.count) * sec.entry_size)) != 0 &&
        errno != EOPNOTSUPP) {
      return;  // a full /dev/shm: no module map, never a SIGBUS
    }
    f->modules_allocated = true;
  }
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  static char buf[8192];  // one capture at a time: the caller holds the round
  size_t have = 0;
  uint32_t count = 0;
  for (;;) {
    ssize_t r = read(fd, buf + have, sizeof(buf) - have);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    have += size_t(r);
    size_t start = 0;
    for (size_t i = 0; i < have; ++i) {
      if (buf[i] != '\n') continue;
      fmt::ModuleEntry m;
      if (count < sec.count && ParseMapsLine(buf + start, buf + i, &m)) {
        m.round = round;
        m.reserved = 0;
        f->modules[count++] = m;
      }
      start = i + 1;
    }
    if (start == 0 && have == sizeof(buf)) have = 0;  // a line longer than the buffer: drop it
    memmove(buf, buf + start, have - start);
    have -= start;
  }
  close(fd);
  __atomic_store_n(&f->header->counters.module_count, count, __ATOMIC_RELEASE);
}

}  // namespace

void FatalSignalHandler(int sig, siginfo_t* info, void* uc) {
  int saved_errno = errno;
  TraceFile* f = __atomic_load_n(&g_trace, __ATOMIC_ACQUIRE);
  if (f && !__atomic_exchange_n(&g_in_crash, 1, __ATOMIC_ACQ_REL)) {
    NameTraceFile();
    fmt::ProcessInfo* p = f->process;
    p->signal = sig;
    p->signal_code = info ? info->si_code : 0;
    p->signal_tid = GetTid();
    p->fault_addr = info ? reinterpret_cast<uint64_t>(info->si_addr) : 0;
    p->end_ticks = NowTicks();
    UpdateClock(&p->clock);
    __atomic_store_n(&p->state, uint32_t(fmt::ProcState::kCrashed), __ATOMIC_RELEASE);
    // The crash stack is appended to the current round (it does not start a
    // new one, so the watchdog's stacks of a hang that led here survive).
    uint32_t i = __atomic_fetch_add(&f->header->counters.stack_count, 1, __ATOMIC_ACQ_REL);
    if (i < fmt::kMaxStacks) {
      fmt::StackSlot* s = &f->stacks[i];
      s->tid = uint32_t(p->signal_tid);
      s->reason = uint32_t(fmt::StackReason::kCrash);
      s->round = __atomic_load_n(&f->header->counters.stack_round, __ATOMIC_ACQUIRE);
      s->nframes = 0;
      __atomic_store_n(&s->status, uint32_t(fmt::StackStatus::kPending), __ATOMIC_RELEASE);
      UnwindInto(s, uc);
    }
    CaptureModules(f, __atomic_load_n(&f->header->counters.stack_round, __ATOMIC_ACQUIRE));
  }

  // Hand over to the handler that was there before us, or to the default.
  // A fault re-executes the instruction on return and dies by the default
  // action; a sent signal (raise, abort, kill) is sent again.
  errno = saved_errno;
  ChainToPrevious(sig, info, uc, /*resend=*/!info || info->si_code <= 0 || sig == SIGABRT);
}

// A signal that asks the process to end: who sent it and when, into the
// file (the first one only), then what the program would have done.
void TermSignalHandler(int sig, siginfo_t* info, void* uc) {
  int saved_errno = errno;
  TraceFile* f = __atomic_load_n(&g_trace, __ATOMIC_ACQUIRE);
  if (f && f->process->term_signal == 0) {
    // Worth a file only with something to say: a traced call, a stack
    // (a multiprocessing worker ended by its pool has nothing).
    if (__atomic_load_n(&f->program_called, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&f->header->counters.stack_count, __ATOMIC_ACQUIRE)) {
      NameTraceFile();
    }
    fmt::ProcessInfo* p = f->process;
    p->term_sender_pid = info && info->si_code <= 0 ? info->si_pid : 0;
    p->term_ticks = NowTicks();
    if (p->term_sender_pid > 0) {
      char path[48];
      snprintf(path, sizeof(path), "/proc/%d/comm", p->term_sender_pid);
      char name[sizeof(p->term_sender)] = {};
      int fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        ssize_t n = read(fd, name, sizeof(name) - 1);
        close(fd);
        if (n > 0 && name[n - 1] == '\n') name[n - 1] = '\0';
      }
      memcpy(p->term_sender, name, sizeof(name));
    }
    UpdateClock(&p->clock);
    __atomic_store_n(&p->term_signal, sig, __ATOMIC_RELEASE);
  }
  errno = saved_errno;
  ChainToPrevious(sig, info, uc, /*resend=*/true);
}

namespace {

// Whether thread `tid` of this process blocks `sig` (SigBlk in its status).
bool BlocksSignal(int tid, int sig) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
  char buf[2048];
  ssize_t n = ReadSmallFile(path, buf, sizeof(buf));
  if (n <= 0) return false;
  const char* line = static_cast<const char*>(memmem(buf, size_t(n), "\nSigBlk:", 8));
  if (!line) return false;
  const char* hex = line + 8;
  while (*hex == ' ' || *hex == '\t') ++hex;
  const uint64_t mask = strtoull(hex, nullptr, 16);
  return sig >= 1 && sig <= 64 && (mask >> (sig - 1)) & 1;
}

}  // namespace

namespace {
// Room for the recorder: libunwind's cursor and the module map's reading
// take a few KiB; a guard page below catches what would not fit.
constexpr size_t kAltStackBytes = 64 * 1024;
constexpr size_t kGuardBytes = 4096;
thread_local void* t_alt_stack = nullptr;  // the mapping, guard page first
}  // namespace

void EnsureAltStack() {
  if (t_alt_stack) return;
  stack_t cur;
  if (sigaltstack(nullptr, &cur) != 0 || !(cur.ss_flags & SS_DISABLE)) return;  // the program's own
  void* m = mmap(nullptr, kGuardBytes + kAltStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (m == MAP_FAILED) return;
  mprotect(m, kGuardBytes, PROT_NONE);
  stack_t ss = {};
  ss.ss_sp = static_cast<char*>(m) + kGuardBytes;
  ss.ss_size = kAltStackBytes;
  if (sigaltstack(&ss, nullptr) != 0) {
    munmap(m, kGuardBytes + kAltStackBytes);
    return;
  }
  t_alt_stack = m;
}

void ReleaseAltStack() {
  if (!t_alt_stack) return;
  stack_t cur;
  // Switched off only if it is still ours (the program may have set its own
  // since); never while running on it.
  if (sigaltstack(nullptr, &cur) == 0 && cur.ss_sp == static_cast<char*>(t_alt_stack) + kGuardBytes) {
    if (cur.ss_flags & SS_ONSTACK) return;
    stack_t off = {};
    off.ss_flags = SS_DISABLE;
    if (sigaltstack(&off, nullptr) != 0) return;
  }
  munmap(t_alt_stack, kGuardBytes + kAltStackBytes);
  t_alt_stack = nullptr;
}

namespace {
// /proc/self/task/TID/syscall: "running", or the number of the call the
// thread is blocked in and its arguments. False when it cannot be read.
bool TaskSyscall(int tid, char* line, size_t cap) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
  return ReadSmallFile(path, line, cap) > 0;
}
bool Running(const char* syscall_line) { return !strncmp(syscall_line, "running", 7); }

// Threads of a round blocked waiting for a file lock: the process holding
// it, from /proc/locks (as `hangtrace dump` reads it from outside), so a
// lock held across a collective is a wait-for edge from the file alone.
// Read once they are back in their call (the capture signal restarts it):
// a thread still "running" is read again once, 1 ms later.
void NoteLockHolders(TraceFile* f, const int* tids, int ntids) {
  // True when thread i is still running (to read again).
  auto note = [&](int i) {
    char line[256];
    if (!TaskSyscall(tids[i], line, sizeof(line))) return false;
    if (Running(line)) return true;
    f->stacks[i].lock_holder_pid = FindLockWait(getpid(), line).holder_pid;
    return false;
  };
  bool running[fmt::kMaxStacks] = {};
  bool any = false;
  for (int i = 0; i < ntids; ++i) any |= running[i] = note(i);
  if (!any) return;
  struct timespec ts = {0, 1000000};
  nanosleep(&ts, nullptr);
  for (int i = 0; i < ntids; ++i) {
    if (running[i]) note(i);
  }
}

// Whether the capture signal may interrupt thread `tid` unnoticed: it runs,
// or waits in a call that the signal's return restarts (a futex: mutexes,
// condition variables, c10d's and gloo's waits; a file lock). A thread in
// nanosleep, poll, epoll_wait or the like would see EINTR (a sleep(8) cut
// short): an idle capture, which suspects no hang, leaves it alone.
bool QuietlyInterruptible(int tid) {
  char line[64];
  if (!TaskSyscall(tid, line, sizeof(line))) return false;
  if (Running(line)) return true;
  const long nr = strtol(line, nullptr, 10);
  return nr == SYS_futex || nr == SYS_fcntl || nr == SYS_flock;
}
}  // namespace

int CaptureAllStacks(fmt::StackReason reason, int timeout_ms) {
  TraceFile* f = __atomic_load_n(&g_trace, __ATOMIC_ACQUIRE);
  if (!f || !RuntimeConfig().stacks) return 0;
  NameTraceFile();  // a capture is worth keeping: readers must find it
  // Refuse when someone replaced our handler: the signal would run theirs.
  struct sigaction cur;
  if (CurrentSigaction(StackSignal(), &cur) != 0 || !(cur.sa_flags & SA_SIGINFO) ||
      cur.sa_sigaction != StackSignalHandler) {
    WriteStderrLine("hangtrace: stack capture skipped: the program replaced hangtrace's signal handler");
    return 0;
  }

  // The threads of this process, by raw getdents64: no allocation, no stdio.
  int tids[fmt::kMaxStacks];
  int ntids = 0;
  int dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return 0;
  char buf[4096];
  const int self = GetTid();
  for (;;) {
    long n = syscall(SYS_getdents64, dir, buf, sizeof(buf));
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      auto* d = reinterpret_cast<struct dirent64*>(buf + off);
      off += d->d_reclen;
      int tid = atoi(d->d_name);
      if (tid <= 0 || tid == self || IsTracerThread(tid) || ntids >= int(fmt::kMaxStacks)) continue;
      if (reason == fmt::StackReason::kIdle && !QuietlyInterruptible(tid)) continue;
      tids[ntids++] = tid;
    }
  }
  close(dir);

  fmt::Counters& k = f->header->counters;
  uint32_t round = __atomic_load_n(&k.stack_round, __ATOMIC_ACQUIRE) + 1;
  __atomic_store_n(&k.stack_count, 0u, __ATOMIC_RELEASE);
  __atomic_store_n(&k.stack_round, round, __ATOMIC_RELEASE);
  for (int i = 0; i < ntids; ++i) {
    fmt::StackSlot* s = &f->stacks[i];
    __atomic_store_n(&s->status, uint32_t(fmt::StackStatus::kEmpty), __ATOMIC_RELEASE);
    s->tid = uint32_t(tids[i]);
    s->reason = uint32_t(reason);
    s->round = round;
    s->nframes = 0;
    s->ticks = 0;
    s->lock_holder_pid = 0;
    char path[64], name[32] = {};
    snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tids[i]);
    const ssize_t r = ReadSmallFile(path, name, sizeof(name));
    if (r > 0 && name[r - 1] == '\n') name[r - 1] = '\0';
    memset(s->thread_name, 0, sizeof(s->thread_name));
    memcpy(s->thread_name, name, strnlen(name, sizeof(s->thread_name) - 1));
    __atomic_store_n(&s->status, uint32_t(fmt::StackStatus::kPending), __ATOMIC_RELEASE);
  }
  __atomic_store_n(&k.stack_count, uint32_t(ntids), __ATOMIC_RELEASE);

  // In a Python process the threads that answer are held until CPython has
  // read their frames; one deadline for all threads.
  const bool python = RuntimeConfig().python && PythonCaptureReady();
  if (python) __atomic_store_n(&g_hold_round, round, __ATOMIC_RELEASE);
  const pid_t pid = getpid();
  bool sent[fmt::kMaxStacks] = {};
  for (int i = 0; i < ntids; ++i) {
    // A thread that blocks the signal would keep it pending, and run our
    // handler whenever it unblocks: not asked (dump reads it from outside).
    if (BlocksSignal(tids[i], StackSignal())) {
      __atomic_store_n(&f->stacks[i].status, uint32_t(fmt::StackStatus::kBlocked), __ATOMIC_RELEASE);
      continue;
    }
    sent[i] = syscall(SYS_tgkill, pid, tids[i], StackSignal()) == 0;
  }
  int captured = 0;
  const int64_t deadline = MonoNs() + int64_t(timeout_ms) * 1000000;
  for (;;) {
    int pending = 0;
    captured = 0;
    for (int i = 0; i < ntids; ++i) {
      if (!sent[i]) continue;  // exited meanwhile
      if (__atomic_load_n(&f->stacks[i].status, __ATOMIC_ACQUIRE) == uint32_t(fmt::StackStatus::kPending)) ++pending;
      else ++captured;
    }
    if (pending == 0 || MonoNs() > deadline) break;
    struct timespec ts = {0, 100000};  // 100 us
    nanosleep(&ts, nullptr);
  }
  if (python) {
    const char* error = PythonDumpWhileHeld();
    __atomic_store_n(&g_hold_round, 0u, __ATOMIC_RELEASE);
    syscall(SYS_futex, &g_hold_round, FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
    PythonStoreAfterRelease(error, round);
  }
  CaptureModules(f, round);
  NoteLockHolders(f, tids, ntids);
  return captured;
}

}  // namespace hangtrace
