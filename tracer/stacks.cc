// Native stacks captured inside the process, and fatal signals recorded.
//
// Capture (docs/DUMP.md, "How stacks are captured"): the background thread
// claims one StackSlot per thread of the process (from /proc/self/task) and
// takes each thread's stack one of two ways, decided from
// /proc/self/task/TID/syscall, which the kernel answers without stopping the
// thread:
//   - blocked in a system call (nanosleep, poll, epoll_wait, a futex, a
//     read...): the file gives its stack pointer and pc. The background
//     thread unwinds it from those two registers with libunwind's generic
//     (remote) unwinder over the process's own memory, read with
//     process_vm_readv (a stack that changes under it reads as garbage, never
//     faults), then reads the file again: the same line says the thread
//     stayed in that call, so the frames are of one instant. No signal: a
//     signal handler run on a thread blocked in nanosleep, poll, select,
//     epoll_wait, sem_timedwait or pause makes that call return EINTR, and
//     Linux never restarts those (SA_RESTART cannot help).
//   - running (not in a system call): it has no call to interrupt. It is
//     sent kStackSignal with tgkill, and the handler unwinds from the
//     interrupted context (unw_init_local2 on the ucontext; unw_step is
//     async-signal-safe for the local address space) straight into the
//     mapped file. Should the thread enter a system call in the
//     microseconds between the look and the signal, the handler sees the
//     call's EINTR in its context and says so in the slot.
// Frames are raw program counters: the analyzer names them from the module
// map (written with the round) and the files on disk, with libdw, which
// knows static functions and lines where the nearest dynamic symbol does
// not. A signalled thread that never answers stays pending: the reader
// reports it as such, and `hangtrace dump` can still read it from outside.
//
// In a Python process the signalled threads stay in the handler until
// CPython has dumped their Python frames (python.cc), so that nothing moves
// while it reads them and both stacks are of one instant (the blocked ones
// do not move either); a held thread waits at most kHoldLimitNs.
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
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <pthread.h>
#include <time.h>

#include "tracer/file_locks.h"
#include "tracer/frame_scan.h"
#include "tracer/glibc_threads.h"
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

// libunwind's generic unwinder (libunwind-<arch>.so.8), for threads read
// while blocked: an address space of our own whose accessors read memory
// with process_vm_readv and know two registers, and whose unwind tables come
// from the generic library's own local address space (dl_iterate_phdr, the
// tables read through our accessors). Loaded with the local one.
#if defined(__x86_64__)
#define HT_UNW_GENERIC(x) "_Ux86_64_" #x
constexpr char kGenericUnwindLib[] = "libunwind-x86_64.so.8";
#elif defined(__aarch64__)
#define HT_UNW_GENERIC(x) "_Uaarch64_" #x
constexpr char kGenericUnwindLib[] = "libunwind-aarch64.so.8";
#endif
// No member initializers: the runtime may load it from a constructor that
// runs before this file's dynamic initializers would (they would reset it).
struct BlockedUnwinder {
  unw_addr_space_t (*create_addr_space)(unw_accessors_t*, int);
  unw_accessors_t* (*get_accessors)(unw_addr_space_t);
  int (*init_remote)(unw_cursor_t*, unw_addr_space_t, void*);
  int (*get_reg)(unw_cursor_t*, unw_regnum_t, unw_word_t*);
  int (*step)(unw_cursor_t*);
  void (*flush_cache)(unw_addr_space_t, unw_word_t, unw_word_t);
  int (*get_proc_info)(unw_cursor_t*, unw_proc_info_t*);
  unw_accessors_t* local;  // the generic library's local space's accessors
  unw_addr_space_t as;     // ours
};
BlockedUnwinder g_blocked;  // zero until loaded; `as` set when usable

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

// What the accessors of our address space read from: this process's memory
// and one blocked thread's two registers.
struct BlockedThread {
  pid_t pid;
  unw_word_t sp, pc;
  int pipe[2];  // the fallback reader's, {-1, -1} until needed
  unw_word_t fp;  // the frame pointer, when a scan found it (else 0: unknown)
};

// Reads one word at `addr` without ever faulting: process_vm_readv, or where
// a seccomp policy refuses it, a write of the word into a pipe (the kernel
// checks the address: EFAULT) and back.
int ReadWord(BlockedThread* t, unw_word_t addr, unw_word_t* val) {
  struct iovec local = {val, sizeof(*val)};
  struct iovec remote = {reinterpret_cast<void*>(addr), sizeof(*val)};
  const ssize_t n = process_vm_readv(t->pid, &local, 1, &remote, 1, 0);
  if (n == ssize_t(sizeof(*val))) return 0;
  if (n >= 0 || errno == EFAULT || errno == ESRCH) return -UNW_EINVAL;
  if (t->pipe[0] < 0 && pipe2(t->pipe, O_CLOEXEC | O_NONBLOCK) != 0) return -UNW_EINVAL;
  if (write(t->pipe[1], reinterpret_cast<const void*>(addr), sizeof(*val)) != ssize_t(sizeof(*val))) return -UNW_EINVAL;
  return read(t->pipe[0], val, sizeof(*val)) == ssize_t(sizeof(*val)) ? 0 : -UNW_EINVAL;
}

int AccessMem(unw_addr_space_t, unw_word_t addr, unw_word_t* val, int write, void* arg) {
  return write ? -UNW_EINVAL : ReadWord(static_cast<BlockedThread*>(arg), addr, val);
}
int AccessReg(unw_addr_space_t, unw_regnum_t reg, unw_word_t* val, int write, void* arg) {
  const BlockedThread* t = static_cast<BlockedThread*>(arg);
  if (write) return -UNW_EINVAL;
  if (reg == UNW_REG_IP) return *val = t->pc, 0;
  if (reg == UNW_REG_SP) return *val = t->sp, 0;
#if defined(__x86_64__)
  if (reg == UNW_X86_64_RBP && t->fp) return *val = t->fp, 0;
#endif
  return -UNW_EBADREG;  // unknown: a frame whose rule needs it ends the stack
}
int AccessFpreg(unw_addr_space_t, unw_regnum_t, unw_fpreg_t*, int, void*) { return -UNW_EBADREG; }
int Resume(unw_addr_space_t, unw_cursor_t*, void*) { return -UNW_EINVAL; }
int GetProcName(unw_addr_space_t, unw_word_t, char*, size_t, unw_word_t*, void*) { return -UNW_ENOINFO; }
int GetDynInfoListAddr(unw_addr_space_t, unw_word_t*, void*) { return -UNW_ENOINFO; }
int FindProcInfo(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t* pi, int need, void* arg) {
  if (!g_blocked.local->find_proc_info) return -UNW_ENOINFO;
  return g_blocked.local->find_proc_info(as, ip, pi, need, arg);
}
void PutUnwindInfo(unw_addr_space_t as, unw_proc_info_t* pi, void* arg) {
  if (g_blocked.local->put_unwind_info) g_blocked.local->put_unwind_info(as, pi, arg);
}

void LoadBlockedUnwinder() {
#ifdef HT_UNW_GENERIC
  void* lib = dlopen(kGenericUnwindLib, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return;
  BlockedUnwinder b{};
  b.create_addr_space = reinterpret_cast<decltype(b.create_addr_space)>(dlsym(lib, HT_UNW_GENERIC(create_addr_space)));
  b.get_accessors = reinterpret_cast<decltype(b.get_accessors)>(dlsym(lib, HT_UNW_GENERIC(get_accessors)));
  b.init_remote = reinterpret_cast<decltype(b.init_remote)>(dlsym(lib, HT_UNW_GENERIC(init_remote)));
  b.get_reg = reinterpret_cast<decltype(b.get_reg)>(dlsym(lib, HT_UNW_GENERIC(get_reg)));
  b.step = reinterpret_cast<decltype(b.step)>(dlsym(lib, HT_UNW_GENERIC(step)));
  b.flush_cache = reinterpret_cast<decltype(b.flush_cache)>(dlsym(lib, HT_UNW_GENERIC(flush_cache)));
  b.get_proc_info = reinterpret_cast<decltype(b.get_proc_info)>(dlsym(lib, HT_UNW_GENERIC(get_proc_info)));
  auto* local_space = static_cast<unw_addr_space_t*>(dlsym(lib, HT_UNW_GENERIC(local_addr_space)));
  if (!b.create_addr_space || !b.get_accessors || !b.init_remote || !b.get_reg || !b.step || !b.flush_cache ||
      !b.get_proc_info || !local_space || !*local_space) {
    return;
  }
  // The local space's accessors are filled in by the library's first
  // init_remote (its tdep_init), before any of ours is called.
  b.local = b.get_accessors(*local_space);
  static unw_accessors_t ours = {FindProcInfo, PutUnwindInfo, GetDynInfoListAddr, AccessMem,
                                 AccessReg,    AccessFpreg,   Resume,             GetProcName};
  if (!b.local || !(b.as = b.create_addr_space(&ours, 0))) return;
  g_blocked = b;
#endif
}

// The pthread_t of each thread of the process (glibc_threads.h): a thread
// read while blocked cannot tell its own, and CPython names its threads by
// it.
struct ThreadHandles {
  int count = 0;
  int tids[fmt::kMaxStacks];
  uint64_t handles[fmt::kMaxStacks];
  uint64_t Of(int tid) const {
    for (int i = 0; i < count; ++i) {
      if (tids[i] == tid) return handles[i];
    }
    return 0;
  }
};

ThreadHandles FindThreadHandles() {
  ThreadHandles out;
  BlockedThread reader{getpid(), 0, 0, {-1, -1}, 0};
  glibc_threads::Walk(
      [](const char* name) { return uint64_t(reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, name))); },
      [&](uint64_t addr, uint64_t* word) {
        unw_word_t w = 0;
        const bool ok = ReadWord(&reader, addr, &w) == 0;
        *word = w;
        return ok;
      },
      [&](int tid, uint64_t thread) {
        out.tids[out.count] = tid;
        out.handles[out.count++] = thread;
        return out.count < int(fmt::kMaxStacks);
      });
  if (reader.pipe[0] >= 0) {
    close(reader.pipe[0]);
    close(reader.pipe[1]);
  }
  return out;
}

// One unwind of a blocked thread into `slot`'s frames: how many, whether
// it reached the thread's outermost frame (libunwind's step said "end",
// where the CFI marks the return address undefined: _start, clone3), and
// the stack pointer of its last frame.
struct BlockedUnwind {
  uint32_t frames = 0;
  bool whole = false, truncated = false;
  unw_word_t last_sp = 0;
  unw_word_t last_start = 0;     // where the last frame's function starts (0: no unwind tables for it)
  unw_word_t last_end = 0;       // and ends
  uint32_t without_tables = 0;   // frames whose pc no unwind table covers
};

BlockedUnwind UnwindBlocked(fmt::StackSlot* slot, BlockedThread* t) {
  BlockedUnwind u;
  unw_cursor_t cursor;
  if (g_blocked.init_remote(&cursor, g_blocked.as, t) != 0) return u;
  // The pc of a blocked thread is exact (the instruction after its
  // syscall, on the call's line); a caller's is a return address.
  for (bool exact = true;; exact = false) {
    if (u.frames == fmt::kMaxFrames) {
      u.truncated = true;
      break;
    }
    unw_word_t ip = 0;
    if (g_blocked.get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
    g_blocked.get_reg(&cursor, UNW_REG_SP, &u.last_sp);
    // (libunwind answers a pc no table covers with a one-byte procedure at
    // the pc itself, not an error.)
    unw_proc_info_t pi;
    const bool tables = g_blocked.get_proc_info(&cursor, &pi) == 0 && !(pi.start_ip == ip && pi.end_ip == ip + 1);
    u.last_start = tables ? pi.start_ip : 0;
    u.last_end = tables ? pi.end_ip : 0;
    u.without_tables += !tables;
    fmt::StackFrame& f = slot->frames[u.frames++];
    f.pc = exact ? ip : ip - 1;
    f.offset = 0;
    f.symbol[0] = '\0';
    const int step = g_blocked.step(&cursor);
    if (step <= 0) {
      u.whole = step == 0;
      break;
    }
  }
  return u;
}

// Unwinds a thread blocked in a system call from its sp and pc into `slot`
// (frames and count); the number of frames. Runs on the background thread
// (libunwind's tables may allocate), never in a signal handler. A frame
// that needs the frame pointer, which /proc does not give, is continued
// from one found on the stack (frame_scan.h) when the unwind from it
// reaches the thread's outermost frame with every frame in an unwind table
// (kStackFramePointerScan); else the stack stays as far as the two
// registers took it.
uint32_t ReadBlockedStack(fmt::StackSlot* slot, const TaskState& state, bool* truncated) {
  *truncated = false;
  if (!g_blocked.as) return 0;
  BlockedThread t{getpid(), state.sp, state.pc, {-1, -1}, 0};
  BlockedUnwind u = UnwindBlocked(slot, &t);
  if (!u.whole && !u.truncated && u.frames > 0) {
    fmt::StackFrame first[fmt::kMaxFrames];
    memcpy(first, slot->frames, u.frames * sizeof(first[0]));
    const BlockedUnwind cut = u;
    auto read = [&](uint64_t addr, uint64_t* word) {
      unw_word_t w = 0;
      const bool ok = ReadWord(&t, addr, &w) == 0;
      *word = w;
      return ok;
    };
    const bool found = frame_scan::ForEachCandidate(read, cut.last_sp, cut.last_start, cut.last_end, [&](uint64_t fp) {
      t.fp = fp;
      u = UnwindBlocked(slot, &t);
      if (u.whole && u.frames > cut.frames && u.without_tables == cut.without_tables &&
          !memcmp(first, slot->frames, cut.frames * sizeof(first[0]))) {
        return true;
      }
      u = cut;
      return false;
    });
    if (found) {
      slot->flags |= fmt::kStackFramePointerScan;
    } else {
      memcpy(slot->frames, first, cut.frames * sizeof(first[0]));
    }
  }
  if (t.pipe[0] >= 0) {
    close(t.pipe[0]);
    close(t.pipe[1]);
  }
  *truncated = u.truncated;
  slot->nframes = u.frames;
  slot->ticks = NowTicks();
  return u.frames;
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
  LoadBlockedUnwinder();
  return true;
}

namespace {
// Whether the signal met the thread in a system call that returned EINTR
// for it: the instruction before the pc is `syscall` and the result is
// -EINTR (a restarted call has its pc back on the instruction instead).
// Async-signal-safe.
bool InterruptedACall(void* uc) {
#if defined(__x86_64__)
  const mcontext_t& m = static_cast<ucontext_t*>(uc)->uc_mcontext;
  const auto pc = static_cast<uint64_t>(m.gregs[REG_RIP]);
  if (pc < 2 || m.gregs[REG_RAX] != -EINTR) return false;
  uint16_t insn = 0;
  memcpy(&insn, reinterpret_cast<const void*>(pc - 2), sizeof(insn));  // code the thread just ran
  return insn == 0x050f;  // 0f 05: syscall
#else
  (void)uc;
  return false;
#endif
}
}  // namespace

void StackSignalHandler(int sig, siginfo_t* info, void* uc) {
  int saved_errno = errno;
  // Not a capture's (tgkill from this process): someone sent the program
  // this signal, which then does what it would untraced (by default: ends
  // it).
  if (!info || info->si_code != SI_TKILL || info->si_pid != getpid()) {
    errno = saved_errno;
    ChainToPrevious(sig, info, uc, /*resend=*/true);
    return;
  }
  TraceFile* f = __atomic_load_n(&g_trace, __ATOMIC_ACQUIRE);
  if (f) {
    int tid = GetTid();
    uint32_t count = __atomic_load_n(&f->header->counters.stack_count, __ATOMIC_ACQUIRE);
    uint32_t round = __atomic_load_n(&f->header->counters.stack_round, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < count && i < fmt::kMaxStacks; ++i) {
      fmt::StackSlot* s = &f->stacks[i];
      if (s->tid == uint32_t(tid) && s->round == round &&
          __atomic_load_n(&s->status, __ATOMIC_ACQUIRE) == uint32_t(fmt::StackStatus::kPending)) {
        if (InterruptedACall(uc)) s->flags |= fmt::kStackInterruptedCall;
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
      s->method = uint8_t(fmt::StackMethod::kSignal);
      s->flags = 0;
      s->syscall_nr = 0xffff;
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
// Threads of a round blocked waiting for a file lock: the process holding
// it, from /proc/locks (as `hangtrace dump` reads it from outside), so a
// lock held across a collective is a wait-for edge from the file alone.
// The call a thread waits in is its slot's syscall_nr (read while blocked)
// or, for a signalled thread, read now.
void NoteLockHolders(TraceFile* f, const int* tids, int ntids) {
  for (int i = 0; i < ntids; ++i) {
    const TaskState state = ReadTaskState(tids[i]);
    if (!state.read || state.running) continue;
    f->stacks[i].lock_holder_pid = FindLockWait(getpid(), state.line).holder_pid;
  }
}

// How each thread's stack is taken (see the top): read while it is blocked
// in a system call, signalled while it runs, or not at all. One decision,
// from one look at /proc/self/task/TID/syscall, taken again after a read
// that saw the thread move.
enum class Way { kRead, kSignal, kNone };

Way WayFor(const TaskState& state) {
  if (!state.read) return Way::kNone;
  if (state.running) return Way::kSignal;
  return g_blocked.as ? Way::kRead : Way::kNone;
}

// Reads thread `tid`, blocked in a call, into `slot`: its frames, once the
// file says it stayed in that call while being read (three tries; then the
// frames are kept and marked as possibly of two instants). Returns the
// final look at the thread, for a caller that must signal it after all.
TaskState ReadWhileBlocked(fmt::StackSlot* slot, int tid, TaskState state) {
  for (int attempt = 0;; ++attempt) {
    bool truncated = false;
    const uint32_t n = ReadBlockedStack(slot, state, &truncated);
    const TaskState after = ReadTaskState(tid);
    const bool stayed = after.read && !strcmp(after.line, state.line);
    if (stayed || attempt == 2 || WayFor(after) != Way::kRead) {
      if (!stayed) slot->flags |= fmt::kStackMoved;
      slot->method = uint8_t(fmt::StackMethod::kBlockedRead);
      slot->syscall_nr = state.nr >= 0 && state.nr < 0xffff ? uint16_t(state.nr) : 0xffff;
      const auto status = n == 0 ? fmt::StackStatus::kUnread
                          : truncated ? fmt::StackStatus::kTruncated : fmt::StackStatus::kDone;
      if (stayed || WayFor(after) != Way::kSignal) {
        __atomic_store_n(&slot->status, uint32_t(status), __ATOMIC_RELEASE);
      }
      return after;
    }
    state = after;
  }
}
}  // namespace

int CaptureAllStacks(fmt::StackReason reason, int timeout_ms) {
  TraceFile* f = __atomic_load_n(&g_trace, __ATOMIC_ACQUIRE);
  if (!f || !RuntimeConfig().stacks) return 0;
  NameTraceFile();  // a capture is worth keeping: readers must find it
  // A running thread is signalled; refuse that when someone replaced our
  // handler (the signal would run theirs). Blocked threads are read anyway.
  struct sigaction cur;
  const bool may_signal = CurrentSigaction(StackSignal(), &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
                          cur.sa_sigaction == StackSignalHandler;
  static bool said_replaced = false;
  if (!may_signal && !said_replaced) {
    said_replaced = true;
    WriteStderrLine("hangtrace: stacks of running threads skipped: the program replaced hangtrace's signal handler");
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
      tids[ntids++] = tid;
    }
  }
  close(dir);

  fmt::Counters& k = f->header->counters;
  uint32_t round = __atomic_load_n(&k.stack_round, __ATOMIC_ACQUIRE) + 1;
  __atomic_store_n(&k.stack_count, 0u, __ATOMIC_RELEASE);
  __atomic_store_n(&k.stack_round, round, __ATOMIC_RELEASE);
  // The round's module map before any of its stacks is done: a reader
  // that finds a stack done finds the modules that name its frames (taken
  // after, a read in between showed the same stack as raw addresses, which
  // compared as another place: a rank that had not moved "moved").
  CaptureModules(f, round);
  for (int i = 0; i < ntids; ++i) {
    fmt::StackSlot* s = &f->stacks[i];
    __atomic_store_n(&s->status, uint32_t(fmt::StackStatus::kEmpty), __ATOMIC_RELEASE);
    s->tid = uint32_t(tids[i]);
    s->reason = uint32_t(reason);
    s->round = round;
    s->nframes = 0;
    s->ticks = 0;
    s->lock_holder_pid = 0;
    s->pthread_id = 0;
    s->method = uint8_t(fmt::StackMethod::kSignal);
    s->flags = 0;
    s->syscall_nr = 0xffff;
    memset(s->reserved, 0, sizeof(s->reserved));
    char path[64], name[32] = {};
    snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tids[i]);
    const ssize_t r = ReadSmallFile(path, name, sizeof(name));
    if (r > 0 && name[r - 1] == '\n') name[r - 1] = '\0';
    memset(s->thread_name, 0, sizeof(s->thread_name));
    memcpy(s->thread_name, name, strnlen(name, sizeof(s->thread_name) - 1));
    __atomic_store_n(&s->status, uint32_t(fmt::StackStatus::kPending), __ATOMIC_RELEASE);
  }
  __atomic_store_n(&k.stack_count, uint32_t(ntids), __ATOMIC_RELEASE);
  if (g_blocked.as) g_blocked.flush_cache(g_blocked.as, 0, 0);  // modules may have come and gone since
  const ThreadHandles handles = FindThreadHandles();

  // In a Python process the threads that answer are held until CPython has
  // read their frames; one deadline for all threads.
  const bool python = RuntimeConfig().python && PythonCaptureReady();
  if (python) __atomic_store_n(&g_hold_round, round, __ATOMIC_RELEASE);
  const pid_t pid = getpid();
  bool sent[fmt::kMaxStacks] = {};
  int captured = 0;
  // Looks at every thread, a few ms apart: one seen blocked in a call at any
  // look is read where it waits. One running at every look is signalled
  // only when it ran in user mode meanwhile (SafeToInterrupt): "running"
  // also means running in the kernel (a long read, getrandom, a call on its
  // way to sleep), where a signal gives a short count or EINTR.
  bool decided[fmt::kMaxStacks] = {};
  ThreadCpu first_cpu[fmt::kMaxStacks];
  bool have_cpu[fmt::kMaxStacks] = {};
  for (int i = 0; i < ntids; ++i) {
    have_cpu[i] = ReadThreadCpu(0, tids[i], &first_cpu[i]);
    f->stacks[i].pthread_id = handles.Of(tids[i]);  // CPython's name for it, whatever is read
  }
  // A running thread is decided as soon as it has run enough to tell where
  // (EnoughToDecide: a yielding MPI rank in about 0.1 s), a starved one at
  // the last look; and signalled at once, while it is where it was seen.
  auto leave_unread = [&](int i) {
    f->stacks[i].flags |= fmt::kStackNotSignalled;
    __atomic_store_n(&f->stacks[i].status, uint32_t(fmt::StackStatus::kUnread), __ATOMIC_RELEASE);
  };
  auto signal_now = [&](int i) {
    fmt::StackSlot* s = &f->stacks[i];
    if (!may_signal) return leave_unread(i);
    // A thread that blocks the signal would keep it pending, and run our
    // handler whenever it unblocks: not asked (dump reads it from outside).
    if (BlocksSignal(tids[i], StackSignal())) {
      __atomic_store_n(&s->status, uint32_t(fmt::StackStatus::kBlocked), __ATOMIC_RELEASE);
      return;
    }
    sent[i] = syscall(SYS_tgkill, pid, tids[i], StackSignal()) == 0;
    if (!sent[i]) __atomic_store_n(&s->status, uint32_t(fmt::StackStatus::kUnread), __ATOMIC_RELEASE);
  };
  int undecided = ntids;
  for (int look = 0; look < kMaxRunningLooks && undecided > 0; ++look) {
    if (look > 0) {
      struct timespec gap = {0, long(kRunningLookGapUs) * 1000};
      nanosleep(&gap, nullptr);
    }
    const bool last = look + 1 == kMaxRunningLooks;
    for (int i = 0; i < ntids; ++i) {
      if (decided[i]) continue;
      fmt::StackSlot* s = &f->stacks[i];
      const TaskState state = ReadTaskState(tids[i]);
      if (WayFor(state) == Way::kRead) {
        ReadWhileBlocked(s, tids[i], state);
        if (__atomic_load_n(&s->status, __ATOMIC_ACQUIRE) == uint32_t(fmt::StackStatus::kPending)) {
          s->method = uint8_t(fmt::StackMethod::kSignal);  // it woke up: looked at again
          s->flags = 0;
          s->syscall_nr = 0xffff;
          continue;
        }
        captured += s->nframes > 0;
      } else if (WayFor(state) == Way::kSignal) {
        ThreadCpu now;
        const bool known = have_cpu[i] && ReadThreadCpu(0, tids[i], &now);
        const RunningVerdict verdict = JudgeRunning(known, last, first_cpu[i], now);
        if (verdict == RunningVerdict::kLookAgain) continue;
        if (verdict == RunningVerdict::kInterrupt) signal_now(i);
        else leave_unread(i);
      } else {
        __atomic_store_n(&s->status, uint32_t(fmt::StackStatus::kUnread), __ATOMIC_RELEASE);  // gone, unreadable
      }
      decided[i] = true;
      --undecided;
    }
  }
  const int read_blocked = captured;
  const int64_t deadline = MonoNs() + int64_t(timeout_ms) * 1000000;
  for (;;) {
    int pending = 0;
    captured = read_blocked;
    for (int i = 0; i < ntids; ++i) {
      if (!sent[i]) continue;  // read, or exited meanwhile
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
  NoteLockHolders(f, tids, ntids);
  return captured;
}

}  // namespace hangtrace
