// The runtime's one background thread: heartbeat, clock calibration and the
// watchdog. It never calls into MPI, NCCL or CUDA, never takes a lock that a
// traced thread may hold, and prints with write(2) only.
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "tracer/internal.h"
#include "tracer/procfs.h"
#include "tracer/python.h"
#include "tracer/runtime.h"

namespace hangtrace {

int g_tracer_tids[kMaxTracerThreads];  // hangtrace's own threads (StartTracerThread)

namespace {

constexpr int64_t kTickNs = 100 * 1000000;       // wake-up period
// Every wake-up: when processes die, the order of their last heartbeats is
// the order of their deaths to this precision.
constexpr int64_t kHeartbeatNs = kTickNs;

// Reads the current and last calls of thread slot `i`. False when they kept
// changing (the owner is busy entering and leaving calls: not stuck).
bool ReadCalls(const TraceFile* f, uint32_t i, fmt::ThreadCalls* out) {
  return fmt::ReadThreadCalls(&f->threads[i], f->ring + uint64_t(i) * f->lane_slots, f->lane_slots,
                              f->header->features, out, 4);
}

std::string DescribeCall(const TraceFile* f, const fmt::Record& r) {
  std::string name = "call";
  if (r.call < f->header->counters.call_count) name = f->calls[r.call].name;
  std::string s = name;
  if (r.seq) s += " #" + std::to_string(r.seq);
  if (r.comm != fmt::kNoComm && r.comm < fmt::kMaxComms) {
    const fmt::CommEntry& c = f->comms[r.comm];
    char id[32];
    snprintf(id, sizeof(id), "%016llx", static_cast<unsigned long long>(c.id));
    s += std::string(" on comm '") + (c.label[0] ? c.label : id) + "'";
  }
  // A root or peer as a world rank, what people count in (the report says
  // the same): the communicator's member list maps it.
  if (r.peer >= 0) {
    std::string who = std::to_string(r.peer) + " of its comm";
    if (r.comm != fmt::kNoComm && r.comm < fmt::kMaxComms) {
      const fmt::CommEntry& c = f->comms[r.comm];
      const uint32_t pool = f->header->sections[fmt::kSecMembers].count;
      if (c.flags & fmt::kCommWorld) {
        who = "rank " + std::to_string(r.peer);
      } else if ((c.flags & fmt::kCommMembersKnown) && r.peer < c.size &&
                 uint64_t(c.members_offset) + uint64_t(r.peer) < pool) {
        who = "rank " + std::to_string(f->members[c.members_offset + uint32_t(r.peer)]);
      }
    }
    const fmt::CallInfo* ci = r.call < f->header->counters.call_count ? &f->calls[r.call] : nullptr;
    const uint8_t flags = ci ? ci->flags : 0;
    const fmt::Op op = ci ? fmt::Op(ci->op) : fmt::Op::kNone;
    if (flags & fmt::kCallRooted) s += " root " + who;
    else if (op == fmt::Op::kSend || op == fmt::Op::kSendrecv) s += " to " + who;
    else if (op == fmt::Op::kRecv || op == fmt::Op::kProbe) s += " from " + who;
    else s += " peer " + who;
    if ((flags & fmt::kCallP2p) && r.tag >= 0) s += " tag " + std::to_string(r.tag);
  }
  return s;
}

// A process that has been in no traced call for the watchdog's timeout
// (since its newest call ended, or, a rank that ended none, since it had
// its rank: OutsideCallsSince): its threads' stacks, once per such stretch, without a word on
// stderr. Most often it computes; but a rank blocked in a call hangtrace
// does not trace (DistributedDataParallel's gradient all-reduce from C++, a
// file lock) would otherwise leave nothing for the analysis to tell it by.
// Only threads the signal cannot disturb are asked (stacks.cc): a sleeping
// one is no call anyway.
uint64_t g_idle_captured_after = 0;  // the stretch's start (OutsideCallsSince) the last idle capture followed

// When the process's stretch outside traced calls began, if it is in none
// now (0: in one, or entering one, or still starting): the end of its
// newest call, or, for a rank that has ended none, when it had its rank
// from a communication library (torch.distributed's init_process_group
// returned: InitializedTicks). A job can hang before its first traced call
// ends (DistributedDataParallel's all-reduces come from C++, and a script
// may call torch.distributed itself only later); before that moment the
// process still starts (imports, meets the others in the rendezvous), and
// on a loaded node that outlasts a short timeout with nothing hung. A
// forked child (a DataLoader worker) is no rank of its own.
uint64_t OutsideCallsSince(TraceFile* f) {
  const uint32_t n = __atomic_load_n(&f->header->counters.thread_count, __ATOMIC_ACQUIRE);
  uint64_t newest = 0;
  for (uint32_t i = 0; i < n && i < f->thread_capacity; ++i) {
    const fmt::ThreadSlot* s = &f->threads[i];
    if (!__atomic_load_n(&s->tid, __ATOMIC_ACQUIRE) || (s->flags & fmt::kThreadTracer)) continue;
    fmt::ThreadCalls calls;
    if (!ReadCalls(f, i, &calls) || calls.in_call) return 0;  // in a call, or entering one
    if (calls.has_last) newest = std::max(newest, calls.last.ticks);
  }
  const fmt::ProcessInfo* p = f->process;
  if (!newest && p->rank >= 0 && !p->forked) newest = InitializedTicks();
  return newest;
}

// `newest` (OutsideCallsSince) when it was at least `limit` ticks ago; else 0.
uint64_t IdleFor(uint64_t newest, uint64_t now_ticks, uint64_t limit) {
  return newest && now_ticks >= newest && now_ticks - newest >= limit ? newest : 0;
}

void IdleCapture(TraceFile* f, uint64_t newest) {
  if (!RuntimeConfig().stacks || g_idle_captured_after == newest) return;
  // A watchdog's round (a call that stayed too long) is worth more than
  // this one, which would replace it: kept.
  if (__atomic_load_n(&f->header->counters.stack_count, __ATOMIC_ACQUIRE) &&
      f->stacks[0].reason == uint32_t(fmt::StackReason::kWatchdog)) {
    return;
  }
  g_idle_captured_after = newest;
  CaptureAllStacks(fmt::StackReason::kIdle, 200);
}

// --- blocked outside any traced call ---------------------------------------------------------
// A process in no traced call for the timeout is most often computing. It
// is blocked instead (DDP's gradient all-reduce, which torch issues from
// C++; a DataLoader's queue whose worker never fills it; a file lock; an
// MPI call hangtrace does not wrap) when its program threads ran no CPU for
// the second half of that time (nor did its child processes: a DataLoader
// worker that computes, a subprocess it waits for), and its main thread
// waits in a system call that waits for something (not a sleep: a rank in
// time.sleep waits for nobody). Such a process starts the automatic
// report's round as a call past the timeout does, once per stretch outside
// calls, with its stacks taken at that moment: the job is reported whenever
// every rank is blocked, in a traced call or not. The report's helper then
// judges the whole job from the stacks (the stack call table); a slow job
// moves between its two looks. A main thread spinning inside a
// communication library, found there by two captures, is blocked too.
struct BlockedProbe {
  uint64_t idle_after = 0;   // the stretch's start (OutsideCallsSince)
  uint64_t window_start = 0; // ticks: where the CPU was last read
  uint64_t cpu = 0;          // program threads' CPU then (clock ticks of /proc)
  bool said = false;         // this stretch started its round
  char why[200] = {};        // when said: what was found, for the round's folder
  uint64_t armed_at = 0;     // ticks: found blocked only a timeout after this
};
BlockedProbe g_blocked;
// Set when a round this process started as blocked found no hang: the
// stretch may start another, a timeout later (a rank blocked at its start
// while the others still started found the job moving; the hang that
// follows, in the same stretch, must still get its round).
bool g_blocked_rearm = false;

// Whether a thread of `pid` (this process: 0, hangtrace's own apart) is
// runnable (R): it waits only for a CPU, and on a busy machine may have
// had none for a while, at work all along. (Not a thread in an
// uninterruptible wait, D: a file system that never answers is a hang.)
bool AnyThreadAtWork(pid_t pid) {
  char dir_path[64];
  if (pid) snprintf(dir_path, sizeof(dir_path), "/proc/%d/task", int(pid));
  else snprintf(dir_path, sizeof(dir_path), "/proc/self/task");
  DIR* tasks = opendir(dir_path);
  if (!tasks) return false;
  bool at_work = false;
  while (struct dirent* e = readdir(tasks)) {
    const int tid = atoi(e->d_name);
    if (tid <= 0 || (!pid && IsTracerThread(tid))) continue;
    ThreadCpu t;
    if (ReadThreadCpu(pid, tid, &t) && t.state == 'R') {
      at_work = true;
      break;
    }
  }
  closedir(tasks);
  return at_work;
}

// CPU run by the live descendants of `pid` (each thread's children, read
// from /proc/PID/task/TID/children, 3 levels down, 64 processes at most),
// with what their own waited-for children ran; `at_work` (when given) set
// when a thread of one is runnable (AnyThreadAtWork).
uint64_t DescendantsCpu(pid_t pid, int depth, int* budget, bool* at_work) {
  uint64_t cpu = 0;
  char dir_path[64];
  snprintf(dir_path, sizeof(dir_path), "/proc/%d/task", int(pid));
  DIR* tasks = opendir(dir_path);
  if (!tasks) return 0;
  while (struct dirent* e = readdir(tasks)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char path[340], buf[1024];
    snprintf(path, sizeof(path), "%s/%s/children", dir_path, e->d_name);
    if (ReadSmallFile(path, buf, sizeof(buf)) <= 0) continue;
    for (char* p = buf; *p && *budget > 0;) {
      char* end = nullptr;
      const long child = strtol(p, &end, 10);
      if (end == p) break;
      p = end;
      ThreadCpu c;
      if (child <= 0 || !ReadThreadCpu(pid_t(child), 0, &c)) continue;
      --*budget;
      cpu += c.user + c.kernel + c.waited_children;
      if (at_work && !*at_work) *at_work = AnyThreadAtWork(pid_t(child));
      if (depth < 3) cpu += DescendantsCpu(pid_t(child), depth + 1, budget, at_work);
    }
  }
  closedir(tasks);
  return cpu;
}

// CPU the process's own threads have run (clock ticks), hangtrace's apart,
// and its child processes, live (a DataLoader's workers, a subprocess it
// waits for, a shell's child: its work, done elsewhere) or ended and waited
// for (so that the sum never falls when one ends); UINT64_MAX when /proc
// cannot say. `at_work` (optional): whether a thread of the process or of
// its live descendants is runnable (AnyThreadAtWork).
uint64_t ProgramCpu(bool* at_work = nullptr) {
  if (at_work) *at_work = AnyThreadAtWork(0);
  ThreadCpu all;
  if (!ReadThreadCpu(0, 0, &all)) return UINT64_MAX;
  uint64_t ours = 0;
  for (const int& tid : g_tracer_tids) {
    ThreadCpu t;
    const int id = __atomic_load_n(&tid, __ATOMIC_ACQUIRE);
    if (id && ReadThreadCpu(0, id, &t)) ours += t.user + t.kernel;
  }
  const uint64_t total = all.user + all.kernel;
  int budget = 64;
  return (total >= ours ? total - ours : 0) + all.waited_children + DescendantsCpu(getpid(), 1, &budget, at_work);
}

// The system call the main thread waits in, when it waits for something
// else: a futex, a poll, a read, a lock; -1 when it runs, is in user mode,
// or sleeps.
long MainThreadWaitsIn() {
  const TaskState t = ReadTaskState(int(getpid()));
  if (t.running || t.nr < 0) return -1;  // running, or in user mode
  if (t.nr == SYS_nanosleep || t.nr == SYS_clock_nanosleep) return -1;
#ifdef SYS_pause
  if (t.nr == SYS_pause) return -1;
#endif
  return t.nr;
}

// A communication library's file, by name: MPI's (Open MPI with its
// components, MPICH), its transports, gloo, NCCL/RCCL.
bool IsCommunicationLibrary(const char* path) {
  const char* base = strrchr(path, '/');
  base = base ? base + 1 : path;
  static const char* const kPrefixes[] = {"libmpi",  "libopen-pal", "libopen-rte", "mca_",   "libmpich",
                                          "libucp",  "libucs",      "libuct",      "libfabric", "libpsm",
                                          "libgloo", "libnccl",     "librccl",     "libpmix"};
  for (const char* prefix : kPrefixes) {
    if (strncmp(base, prefix, strlen(prefix)) == 0) return true;
  }
  return false;
}

// Whether the main thread's stack in the newest capture round, taken since
// `since_ticks`, runs inside a communication library (any of its 16
// innermost frames, by the round's module map): an MPI call hangtrace does
// not wrap, spinning in its progress loop.
bool MainThreadInCommunicationLibrary(TraceFile* f, uint64_t since_ticks) {
  const uint32_t count = std::min(__atomic_load_n(&f->header->counters.stack_count, __ATOMIC_ACQUIRE), fmt::kMaxStacks);
  const fmt::StackSlot* main = nullptr;
  for (uint32_t i = 0; i < count; ++i) {
    const fmt::StackSlot* s = &f->stacks[i];
    const uint32_t status = __atomic_load_n(&s->status, __ATOMIC_ACQUIRE);
    if (s->tid == uint32_t(getpid()) && s->ticks >= since_ticks &&
        (status == uint32_t(fmt::StackStatus::kDone) || status == uint32_t(fmt::StackStatus::kTruncated))) {
      main = s;
    }
  }
  if (!main || !f->modules || !f->modules_allocated) return false;
  const uint32_t modules = f->header->sections[fmt::kSecModules].count;
  for (uint32_t k = 0; k < main->nframes && k < 16 && k < fmt::kMaxFrames; ++k) {
    const uint64_t pc = main->frames[k].pc;
    for (uint32_t m = 0; m < modules; ++m) {
      const fmt::ModuleEntry& e = f->modules[m];
      if (e.round == main->round && pc >= e.start && pc < e.end) {
        if (IsCommunicationLibrary(e.path)) return true;
        break;
      }
    }
  }
  return false;
}

// True once per stretch outside calls (again a timeout after a round that
// found no hang: RearmBlockedProbe), when the process is found blocked
// (its stacks then taken again: where it is blocked now).
bool BlockedOutsideCalls(TraceFile* f, uint64_t newest, uint64_t now_ticks, uint64_t limit) {
  const uint64_t half = IdleFor(newest, now_ticks, limit / 2);
  if (!half) {
    g_blocked = BlockedProbe{};
    return false;
  }
  if (g_blocked.idle_after != half) {  // a new stretch: its first window starts
    g_blocked = BlockedProbe{half, now_ticks, ProgramCpu(), false, {}, half};
    g_blocked_rearm = false;
    return false;
  }
  if (g_blocked.said && __atomic_exchange_n(&g_blocked_rearm, false, __ATOMIC_ACQ_REL)) {
    g_blocked = BlockedProbe{half, now_ticks, ProgramCpu(), false, {}, now_ticks};
    return false;
  }
  if (g_blocked.said || now_ticks - g_blocked.armed_at < limit || now_ticks - g_blocked.window_start < limit / 2) {
    return false;
  }
  bool at_work = false;
  const uint64_t cpu = ProgramCpu(&at_work);
  // One clock tick (10 ms) of slack: the kernel's accounting, a signal.
  // No CPU is not enough on a busy machine: a subprocess waiting for its
  // turn on a CPU ran none for a second, and is at work.
  const bool still = cpu != UINT64_MAX && g_blocked.cpu != UINT64_MAX && cpu <= g_blocked.cpu + 1 && !at_work;
  const bool capture = RuntimeConfig().stacks;
  const double hz = double(f->process->clock.ticks_hz);
  const char* since = half == InitializedTicks() ? "since it had its rank; none of its own ended yet" : "since its last ended";
  const long waits_in = still ? MainThreadWaitsIn() : -1;
  if (waits_in >= 0) {
    g_blocked.said = true;
    snprintf(g_blocked.why, sizeof(g_blocked.why),
             "in no traced call for %.1f s (%s), no CPU run in the last %.1f s (%llu clock ticks then, %llu now), "
             "its main thread waiting in system call %ld",
             double(now_ticks - half) / hz, since, double(now_ticks - g_blocked.window_start) / hz,
             (unsigned long long)g_blocked.cpu, (unsigned long long)cpu, waits_in);
    if (capture) CaptureAllStacks(fmt::StackReason::kIdle, 200);
    return true;
  }
  // It ran. Spinning inside a communication library (an MPI call hangtrace
  // does not wrap waits in its progress loop, on the CPU) counts as blocked
  // when two captures, the stretch's and one taken now, both find it there;
  // the second is taken only when the first did, so that a rank that
  // computes is not looked at again.
  if (capture && MainThreadInCommunicationLibrary(f, half)) {
    CaptureAllStacks(fmt::StackReason::kIdle, 200);
    if (MainThreadInCommunicationLibrary(f, now_ticks)) {
      g_blocked.said = true;
      snprintf(g_blocked.why, sizeof(g_blocked.why),
               "in no traced call for %.1f s (%s), its main thread inside a communication library at two captures",
               double(now_ticks - half) / hz, since);
      return true;
    }
  }
  g_blocked.window_start = now_ticks;  // the next window starts now
  g_blocked.cpu = cpu;
  return false;
}

}  // namespace

void RearmBlockedProbe() { __atomic_store_n(&g_blocked_rearm, true, __ATOMIC_RELEASE); }

namespace {

void Watchdog(TraceFile* f, uint64_t now_ticks) {
  const fmt::ProcessInfo* p = f->process;
  const uint64_t hz = p->clock.ticks_hz;
  if (!p->watchdog_timeout_ms || !hz) return;
  const uint64_t limit = uint64_t((unsigned __int128)p->watchdog_timeout_ms * hz / 1000);
  const uint32_t n = __atomic_load_n(&f->header->counters.thread_count, __ATOMIC_ACQUIRE);
  std::string lines[8];
  int nlines = 0, fired = 0;
  for (uint32_t i = 0; i < n && i < f->thread_capacity; ++i) {
    fmt::ThreadSlot* s = &f->threads[i];
    if (!__atomic_load_n(&s->tid, __ATOMIC_ACQUIRE)) continue;
    fmt::ThreadCalls calls;
    if (!ReadCalls(f, i, &calls) || !calls.in_call) continue;
    const fmt::Record& cur = calls.current;
    if (now_ticks < cur.ticks || now_ticks - cur.ticks < limit) continue;
    if (__atomic_load_n(&s->watchdog_ticks, __ATOMIC_ACQUIRE) == cur.ticks) continue;  // flagged
    __atomic_store_n(&s->watchdog_ticks, cur.ticks, __ATOMIC_RELEASE);
    __atomic_fetch_add(&s->watchdog_fires, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&f->process->watchdog_fires, 1, __ATOMIC_RELAXED);
    const uint64_t ms = uint64_t((unsigned __int128)(now_ticks - cur.ticks) * 1000 / hz);
    fmt::Record mark = cur;  // the hung call, as a WATCHDOG event on our lane
    mark.aux = uint32_t(ms > UINT32_MAX ? UINT32_MAX : ms);
    RecordEvent(mark, fmt::EventKind::kWatchdog);
    ++fired;
    if (nlines < 8) {
      char head[160];
      std::string rank = p->rank >= 0 ? std::to_string(p->rank) : "?";
      snprintf(head, sizeof(head), "hangtrace: watchdog: rank %s pid %d tid %u in ", rank.c_str(),
               p->pid, cur.tid);
      char tail[64];
      snprintf(tail, sizeof(tail), " for %.1f s", double(ms) / 1000.0);
      lines[nlines++] = head + DescribeCall(f, cur) + tail;
    }
  }
  const uint64_t newest = fired ? 0 : OutsideCallsSince(f);
  const uint64_t idle_since = IdleFor(newest, now_ticks, limit);
  if (idle_since) IdleCapture(f, idle_since);
  // Only with the automatic report: alone, a process blocked outside any
  // traced call says nothing (its idle capture is in its file).
  const bool blocked = !fired && AutoReportOn() && BlockedOutsideCalls(f, newest, now_ticks, limit);
  int stacks = 0;
  if (fired && RuntimeConfig().stacks) stacks = CaptureAllStacks(fmt::StackReason::kWatchdog, 200);
  // With the automatic report, the job's log gets one report, not a line
  // per rank: the WATCHDOG records in the file say the rest.
  const bool reported = AutoReportTick(f, fired || blocked, idle_since != 0, p->watchdog_timeout_ms / 1000.0,
                                       blocked ? g_blocked.why : nullptr);
  if (!fired || RuntimeConfig().quiet || reported) return;
  for (int i = 0; i < nlines; ++i) {
    std::string line = lines[i];
    if (i == nlines - 1) {
      line += "; " + std::to_string(stacks) + " thread stacks saved in " + f->path;
    }
    WriteStderrLine(line.c_str());
  }
}

// The background thread's sleep, in a function of its own: a stack read
// from the two registers /proc gives (tracer/frame_scan.h) continues past a
// frame-pointer frame only through a direct call to it, and BackgroundMain
// is called through a register (start_thread); this call is direct, so the
// thread reads whole, down to clone3.
__attribute__((noinline)) void SleepUnlessSignalled(int64_t ns) {
  struct timespec ts = {time_t(ns / 1000000000), long(ns % 1000000000)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  asm volatile("" ::: "memory");  // not a tail call: the frame stays
}

void* BackgroundMain(void*) {
  prctl(PR_SET_NAME, "hangtrace", 0, 0, 0);
  int64_t last_heartbeat = 0;
  int64_t started = MonotonicNs();
  uint64_t ticks = 0;
  bool first = true;
  for (;;) {
    // The first wake-up is early, to calibrate the clock for short programs.
    int64_t sleep_ns = first ? 20 * 1000000 : kTickNs;
    first = false;
    SleepUnlessSignalled(sleep_ns);
    TraceFile* f = __atomic_load_n(&g_trace, __ATOMIC_ACQUIRE);
    if (!f) return nullptr;  // fork child without a file: nothing to do
    fmt::ProcessInfo* p = f->process;
    int64_t now = MonotonicNs();
    // Refine the tick rate: often at first, then every few seconds (the
    // longer the baseline, the better the estimate).
    if (now - started < 10ll * 1000000000 || (p->heartbeat_count % 10) == 0) UpdateClock(&p->clock);
    if (now - last_heartbeat >= kHeartbeatNs) {
      last_heartbeat = now;
      __atomic_store_n(&p->heartbeat_mono_ns, uint64_t(now), __ATOMIC_RELEASE);
      __atomic_store_n(&p->heartbeat_real_ns, RealtimeNs(), __ATOMIC_RELEASE);
      __atomic_fetch_add(&p->heartbeat_count, 1, __ATOMIC_RELEASE);
    }
    Watchdog(f, NowTicks());
    // A dump asked for a capture round (its stacks, and Python frames from
    // CPython's own dumper, which an outside reader may not cover).
    fmt::Counters& k = f->header->counters;
    const uint32_t request = __atomic_load_n(&k.capture_request, __ATOMIC_ACQUIRE);
    if (request != __atomic_load_n(&k.capture_answered, __ATOMIC_ACQUIRE)) {
      if (RuntimeConfig().stacks) CaptureAllStacks(fmt::StackReason::kRequest, 200);
      __atomic_store_n(&k.capture_answered, request, __ATOMIC_RELEASE);
    }
    // Every tick for the first seconds (a dump may come early), then each second.
    if (++ticks < 30 || ticks % 10 == 0) NotePython();
  }
}

}  // namespace

namespace {
// Every tracer thread starts here: nothing it calls is recorded as a traced
// call, and its tid is listed so that stack captures skip it (all its
// signals are blocked: it would never answer).
void* TracerTrampoline(void* main) {
  t_thread.depth = 1u << 30;
  t_thread.tracer_thread = true;
  const int tid = int(syscall(SYS_gettid));
  for (int& slot : g_tracer_tids) {
    int expected = 0;
    if (__atomic_compare_exchange_n(&slot, &expected, tid, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) break;
  }
  return reinterpret_cast<void* (*)(void*)>(main)(nullptr);
}
}  // namespace

bool IsTracerThread(int tid) {
  for (const int& slot : g_tracer_tids) {
    if (__atomic_load_n(&slot, __ATOMIC_ACQUIRE) == tid) return true;
  }
  return false;
}

bool StartTracerThread(void* (*main)(void*)) {
  // Block every signal in the new thread, so signals meant for the program
  // are never delivered to ours.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t th;
  int rc = pthread_create(&th, &attr, TracerTrampoline, reinterpret_cast<void*>(main));
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return rc == 0;
}

void StartBackgroundThread() {
  if (!StartTracerThread(BackgroundMain)) {
    WriteStderrLine("hangtrace: cannot start the watchdog thread; tracing without it");
  }
}

}  // namespace hangtrace
