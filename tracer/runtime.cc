// The runtime: attaches threads to lanes, keeps the call and communicator
// tables, and handles start, fork and exit. The trace file itself (its
// folder, name and layout) is trace_file.cc; the record path is inline in
// runtime.h.
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
bool g_start_pending = false;
uint32_t g_generation = 1;  // never 0, which a thread's fast_generation starts as
constinit thread_local ThreadState t_thread __attribute__((tls_model("initial-exec")));
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
pthread_mutex_t g_start_lock = PTHREAD_MUTEX_INITIALIZER;  // the file made at a first call
pthread_key_t g_thread_key;
bool g_once_done = false;
// Enters every wrapped call into a new file's call table (interpose/).
void (*g_register_calls)() = nullptr;
// The file being made, seen by the thread making it only (RegisterCall
// fills its table before other threads can see it); and whether this thread
// is making it (a call it makes meanwhile is not traced, nor starts again).
thread_local TraceFile* t_building __attribute__((tls_model("initial-exec"))) = nullptr;
thread_local bool t_starting __attribute__((tls_model("initial-exec"))) = false;

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
  __atomic_store_n(&s->current_at, uint64_t(0), __ATOMIC_RELEASE);  // in no call
  __atomic_store_n(&s->tid, 0u, __ATOMIC_RELEASE);
  t_thread.slot = nullptr;
  t_thread.fast_generation = 0;
  ReleaseAltStack();
}

void OnExit(int status, void*) { RecordExit(status); }

// What a fork child takes from its parent for the file it makes at its
// first traced call: the parent's call table (the wrappers' indices in this
// memory point into it), rank and pid. Static: fork children have no heap
// to spare in an atfork handler.
struct Inherited {
  bool forked = false;
  int32_t parent_pid = 0;
  bool from_file = false;  // the parent had a file: its table and rank
  int32_t rank = -1;
  int32_t world_size = -1;
  uint32_t call_count = 0;
  fmt::CallInfo calls[fmt::kMaxCalls];
};
Inherited g_inherited;

// Where the forking thread's records go in the child until it attaches to
// a file of its own: the END of a call it is inside (fork inside MPI_Init,
// system()) is made on the short way, with no test (Recorded), and must not
// reach the parent's file, which the child unmaps.
fmt::ThreadSlot g_fork_scratch_slot;
fmt::Record g_fork_scratch_lane[2];

// In the child after fork(): the parent's mapping is shared with the parent,
// so the child must never write it again. The child makes its own file at
// its first traced call (a fork child that only execs or exits, as most
// do, costs nothing), with the parent's call table so its records decode.
void AtForkChild() {
  ThreadState& t = t_thread;
  t.slot = &g_fork_scratch_slot;
  t.lane = g_fork_scratch_lane;
  t.lane_mask = 1;
  TraceFile* parent = g_trace;
  __atomic_store_n(&g_trace, static_cast<TraceFile*>(nullptr), __ATOMIC_RELEASE);
  __atomic_fetch_add(&g_generation, 1, __ATOMIC_RELEASE);
  pthread_mutex_init(&g_table_lock, nullptr);
  pthread_mutex_init(&g_start_lock, nullptr);
  g_inherited.forked = true;
  g_inherited.parent_pid = int32_t(getppid());
  if (!parent) return;  // the parent had made no file: neither has the child, yet

  uint32_t ncalls = __atomic_load_n(&parent->header->counters.call_count, __ATOMIC_ACQUIRE);
  if (ncalls > fmt::kMaxCalls) ncalls = fmt::kMaxCalls;
  memcpy(g_inherited.calls, parent->calls, ncalls * sizeof(fmt::CallInfo));
  g_inherited.call_count = ncalls;
  g_inherited.from_file = true;
  g_inherited.rank = parent->process->rank;
  g_inherited.world_size = parent->process->world_size;
  munmap(parent->base, parent->size);
  close(parent->fd);
  close(parent->dir_fd);
  __atomic_store_n(&g_start_pending, true, __ATOMIC_RELEASE);
}

// Makes this process's trace file, fills its call table and only then
// publishes it (another thread's wrapper must never read an index before
// it is registered); then the signal handlers and the background thread.
// Under g_start_lock, or before main.
bool OpenTrace() {
  const Config& config = Settings();
  // Once per process lineage (a fork child keeps it): CPUID traps to the
  // hypervisor in a VM, so a process that never traces never asks.
  static bool clock_known = false;
  if (!clock_known) {
    clock_known = true;
    g_clock_is_tsc = DetectInvariantTsc();
  }
  TraceFile* f = &g_file_storage;
  *f = TraceFile{};
  std::string err;
  if (!CreateTraceFile(config, f, NameAtStart(config), &err)) {
    SayNotTracing(((g_inherited.forked ? "fork child " : "not tracing pid ") + std::to_string(getpid()) +
                   (g_inherited.forked ? " runs untraced: " : ": ") + err)
                      .c_str());
    return false;
  }
  if (!g_once_done) {
    g_once_done = true;
    pthread_key_create(&g_thread_key, ReleaseThreadSlot);
    on_exit(OnExit, nullptr);
  }
  if (g_inherited.forked) {
    f->process->forked = 1;
    f->process->parent_pid = g_inherited.parent_pid;
  }
  if (g_inherited.from_file) {
    memcpy(f->calls, g_inherited.calls, g_inherited.call_count * sizeof(fmt::CallInfo));
    __atomic_store_n(&f->header->counters.call_count, g_inherited.call_count, __ATOMIC_RELEASE);
    f->process->rank = g_inherited.rank;
    f->process->world_size = g_inherited.world_size;
    f->process->rank_source = uint8_t(fmt::RankSource::kInherited);
  } else if (g_register_calls) {
    t_building = f;
    g_register_calls();
    t_building = nullptr;
  }
  // Its own line: SayNotTracing's once-per-lineage mark would silence a
  // child's later "not tracing" for a different reason.
  if (config.stacks && !LoadUnwinder(&err)) {
    WriteStderrLine(("hangtrace: no native stacks inside pid " + std::to_string(getpid()) + ": " + err).c_str());
  }
  __atomic_store_n(&g_trace, f, __ATOMIC_RELEASE);
  __atomic_fetch_add(&g_generation, 1, __ATOMIC_RELEASE);
  if (config.stacks) InstallSignalHandlers();
  StartBackgroundThread();
  return true;
}

}  // namespace

const Config& RuntimeConfig() { return Settings(); }

bool AttachThread(ThreadState& t) {
  uint32_t gen = __atomic_load_n(&g_generation, __ATOMIC_ACQUIRE);
  TraceFile* f = __atomic_load_n(&g_trace, __ATOMIC_ACQUIRE);
  t.generation = gen;
  t.fast_generation = 0;
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
      __atomic_fetch_add(&f->header->counters.lanes_refused, 1, __ATOMIC_RELAXED);
      // A program thread that could not be traced is something to say: the
      // file is named (a link needs no room) so the analysis knows this
      // process's trace is incomplete and why, and never reads its silence.
      if (!t.tracer_thread) NameTraceFile();
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
    t.fast_generation = g_clock_is_tsc ? gen : 0;
    pthread_setspecific(g_thread_key, s);
    return true;
  }
  __atomic_fetch_add(&f->header->counters.dropped, 1, __ATOMIC_RELAXED);
  return false;
}

bool CallBeginSlow(ThreadState& t, fmt::Record& r) {
  if (t.generation != __atomic_load_n(&g_generation, __ATOMIC_RELAXED) && !AttachThread(t)) return false;
  if (!t.slot) return false;
  PublishBegin(t, t.slot, r, NowTicks());
  return true;
}

bool CallEndSlow(ThreadState& t, fmt::Record& r, int32_t result) {
  // Forked inside the call: the child's file never saw its BEGIN.
  if (!t.slot || t.generation != __atomic_load_n(&g_generation, __ATOMIC_RELAXED)) return false;
  PublishEnd(t, t.slot, r, result, NowTicks());
  return true;
}

namespace {
// Whether the thread's current call is still the poll published at
// t.poll_ticks (no call has replaced it).
bool StillPolling(const ThreadState& t, const fmt::ThreadSlot* s) {
  const uint64_t c = s->current_at;
  return (c & fmt::kAtCopy) && fmt::InCall(c, s->last_at) &&
         s->current.kind == uint8_t(fmt::EventKind::kBegin) && s->current.ticks == t.poll_ticks;
}

// Before a write of the lane other than a call's BEGIN or END: the current
// and last calls' records that this write or the next two could overwrite
// (the next two may be a BEGIN and an END, which do not look) are copied
// into the slot, and read from there (fmt::ThreadSlot). A long call that
// completes thousands of requests, or marks, keeps its BEGIN readable.
void KeepCallsVisible(ThreadState& t, fmt::ThreadSlot* s) {
  const uint64_t slots = t.lane_mask + 1;
  const uint64_t next = s->head;  // the index this write takes
  if (next + 3 <= slots) return;  // nothing written yet is within reach
  const uint64_t reach = next + 3 - slots;  // indexes below this may go
  auto keep = [&](uint64_t* at, fmt::Record* copy) {
    const uint64_t a = *at;
    if (a == 0 || (a & fmt::kAtCopy) || a - 1 >= reach) return;
    SeqBegin(&s->version);
    *copy = t.lane[(a - 1) & t.lane_mask];  // ours: no writer but this thread
    SeqEnd(&s->version);
    __atomic_store_n(at, a | fmt::kAtCopy, __ATOMIC_RELEASE);
  };
  keep(&s->last_at, &s->last);
  if (fmt::InCall(s->current_at, s->last_at)) keep(&s->current_at, &s->current);
}
}  // namespace

void NotePolling(fmt::Record& r) {
  ThreadState& t = t_thread;
  if (t.depth != 0) return;
  if (t.generation != __atomic_load_n(&g_generation, __ATOMIC_RELAXED) && !AttachThread(t)) return;
  fmt::ThreadSlot* s = t.slot;
  if (!s) return;
  // Still polling, whichever call and request (a loop that alternates
  // MPI_Test on its receive and on its send, as hpcc's RandomAccess does,
  // waits since its first poll that retired nothing): nothing to publish.
  if (t.poll_ticks && StillPolling(t, s)) return;
  r.ticks = NowTicks();
  r.tid = uint32_t(t.tid);
  r.kind = uint8_t(fmt::EventKind::kBegin);
  SeqBegin(&s->version);
  s->current = r;
  SeqEnd(&s->version);
  // Never in the lane: published as a copy, at an index past the last
  // call's END (fmt::ThreadSlot), so that it is the current call.
  __atomic_store_n(&s->current_at, (s->head + 1) | fmt::kAtCopy, __ATOMIC_RELEASE);
  t.poll_ticks = r.ticks;
}

void EndPolling() {
  ThreadState& t = t_thread;
  fmt::ThreadSlot* s = t.slot;
  if (!t.poll_ticks || !s || t.generation != __atomic_load_n(&g_generation, __ATOMIC_RELAXED)) return;
  if (StillPolling(t, s)) __atomic_store_n(&s->current_at, uint64_t(0), __ATOMIC_RELEASE);
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
  KeepCallsVisible(t, t.slot);
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

uint32_t g_comm_slot_reuses[fmt::kMaxComms];

uint64_t NextP2pSeqShared(uint64_t where, uint64_t who, P2pStream* cached) {
  // The stream's exact fields (NextP2pSeq), hashed: its communicator slot
  // and that slot's reuses, its direction (with two ranks, a send to and a
  // receive from the same peer on the same tag are different streams), its
  // peer and tag.
  uint64_t key = Combine(Mix(where), who);
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
    if (k == key) {
      *cached = {where, who, &g_p2p[i].count, 0};
      return __atomic_add_fetch(&g_p2p[i].count, 1, __ATOMIC_RELAXED);
    }
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
  TraceFile* f = g_trace ? g_trace : t_building;
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

namespace {
// With the table full: the slot of the communicator freed longest ago, now
// this one's (kMaxComms: none was freed). Rare (a program that creates and
// frees thousands of communicators), so a scan under the table lock.
uint32_t ReuseFreedCommSlot(TraceFile* f) {
  pthread_mutex_lock(&g_table_lock);
  uint32_t best = fmt::kMaxComms;
  for (uint32_t i = 0; i < fmt::kMaxComms; ++i) {
    const fmt::CommEntry& e = f->comms[i];
    if (!(__atomic_load_n(&e.flags, __ATOMIC_ACQUIRE) & fmt::kCommFreed)) continue;
    if (best == fmt::kMaxComms || e.created_ticks < f->comms[best].created_ticks) best = i;
  }
  if (best < fmt::kMaxComms) {
    fmt::CommEntry* e = &f->comms[best];
    SeqBegin(&e->version);
    e->flags = 0;  // taken: no longer freed, so no other creator takes it
    SeqEnd(&e->version);
    ++g_comm_slot_reuses[best];
  }
  pthread_mutex_unlock(&g_table_lock);
  return best;
}
}  // namespace

uint16_t RegisterComm(const CommDesc& d) {
  TraceFile* f = g_trace;
  if (!f) return fmt::kNoComm;
  fmt::Counters& k = f->header->counters;
  uint32_t index = __atomic_fetch_add(&k.comm_count, 1, __ATOMIC_ACQ_REL);
  if (index >= fmt::kMaxComms) {
    __atomic_store_n(&k.comm_count, fmt::kMaxComms, __ATOMIC_RELEASE);
    index = ReuseFreedCommSlot(f);
    if (index >= fmt::kMaxComms) {
      __atomic_fetch_add(&k.dropped, 1, __ATOMIC_RELAXED);
      __atomic_fetch_add(&k.comms_refused, 1, __ATOMIC_RELAXED);
      return fmt::kNoComm;
    }
  }
  fmt::CommEntry* e = &f->comms[index];
  SeqBegin(&e->version);
  e->created_ticks = NowTicks();
  __atomic_store_n(&e->coll_seq, uint64_t(0), __ATOMIC_RELAXED);
  __atomic_store_n(&e->children, 0u, __ATOMIC_RELAXED);
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

namespace {
uint64_t g_initialized_ticks = 0;
}  // namespace

void SetRank(int32_t rank, int32_t world_size, fmt::RankSource source) {
  TraceFile* f = g_trace;
  if (!f) return;
  f->process->rank = rank;
  f->process->world_size = world_size;
  f->process->rank_source = uint8_t(source);
  if (source == fmt::RankSource::kMpi || source == fmt::RankSource::kNccl || source == fmt::RankSource::kTorch) {
    uint64_t unset = 0;
    __atomic_compare_exchange_n(&g_initialized_ticks, &unset, NowTicks(), false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
  }
}

uint64_t InitializedTicks() { return __atomic_load_n(&g_initialized_ticks, __ATOMIC_ACQUIRE); }


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
  AutoReportAtExit();
  // Nothing of interest (a rank's file named at start, or HANGTRACE_KEEP
  // not asked): no traced call, no stack, no signal, a clean exit. Removed
  // only if the name still holds this very file.
  if (code != 0 || Settings().keep || __atomic_load_n(&f->naming, __ATOMIC_ACQUIRE) != kNamed ||
      __atomic_load_n(&f->program_called, __ATOMIC_ACQUIRE) ||
      __atomic_load_n(&f->header->counters.stack_count, __ATOMIC_ACQUIRE) != 0 ||
      __atomic_load_n(&f->header->counters.lanes_refused, __ATOMIC_ACQUIRE) != 0 || p->term_signal != 0 ||
      p->signal != 0) {
    return;
  }
  struct stat mine, named;
  if (fstat(f->fd, &mine) == 0 && fstatat(f->dir_fd, TraceFileBaseName(f), &named, AT_SYMLINK_NOFOLLOW) == 0 &&
      mine.st_ino == named.st_ino && mine.st_dev == named.st_dev) {
    unlinkat(f->dir_fd, TraceFileBaseName(f), 0);
  }
}

namespace {
// What fd 2 was when the runtime started: hangtrace writes there only while
// it still is (a program may close its stderr and reuse the number for a
// data file, which a report line must never go into).
struct StderrIdentity {
  bool known = false;
  dev_t dev = 0;
  ino_t ino = 0;
};
StderrIdentity g_stderr;

bool StderrIsTheJobs() {
  struct stat st;
  return g_stderr.known && fstat(STDERR_FILENO, &st) == 0 && st.st_dev == g_stderr.dev && st.st_ino == g_stderr.ino;
}
}  // namespace

bool StartRuntime(const Config& config, void (*register_calls)()) {
  Settings() = config;
  g_register_calls = register_calls;
  if (config.off) return false;
  if (struct stat st; fstat(STDERR_FILENO, &st) == 0) g_stderr = {true, st.st_dev, st.st_ino};
  if (!config.errors.empty()) WriteStderrLine(("hangtrace: " + config.errors).c_str());
  static bool atfork_done = false;
  if (!atfork_done) {
    atfork_done = true;
    pthread_atfork(nullptr, nullptr, AtForkChild);
  }
  // A rank (its file says it started, even if it hangs before its first
  // call), or HANGTRACE_KEEP: the file now. Any other process (a shell, a
  // data loader, a compiler in the job's build step) makes it at its first
  // traced call, and one that makes none costs a few pages and no thread.
  if (NameAtStart(config)) return OpenTrace();
  __atomic_store_n(&g_start_pending, true, __ATOMIC_RELEASE);
  return true;
}

bool StartAtFirstCall() {
  // The tracer's own thread never starts it, nor does a call made while
  // this thread is making the file.
  if (t_thread.tracer_thread || t_starting) return false;
  pthread_mutex_lock(&g_start_lock);
  if (!g_trace && __atomic_load_n(&g_start_pending, __ATOMIC_ACQUIRE)) {
    t_starting = true;
    OpenTrace();  // once: a failure is said once and the process runs untraced
    t_starting = false;
    __atomic_store_n(&g_start_pending, false, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&g_start_lock);
  return __atomic_load_n(&g_trace, __ATOMIC_ACQUIRE) != nullptr;
}

void WriteStderrBlock(const char* text, size_t n) {
  // write(2), not stdio: the stderr FILE lock may be held by a hung thread.
  const int saved_errno = errno;
  for (size_t off = 0; off < n && StderrIsTheJobs();) {
    const ssize_t w = write(STDERR_FILENO, text + off, n - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    off += size_t(w);
  }
  errno = saved_errno;
}

void WriteStderrLine(const char* line) {
  size_t n = strlen(line);
  char buf[1024];
  if (n > sizeof(buf) - 2) n = sizeof(buf) - 2;
  memcpy(buf, line, n);
  buf[n++] = '\n';
  WriteStderrBlock(buf, n);
}

}  // namespace hangtrace
