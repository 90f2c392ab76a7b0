// The runtime inside a traced process: the mapped trace file, the per-thread
// lanes, and the record path used by every wrapper in interpose/.
//
// Record path (CallBegin/CallEnd): a TLS load, one clock read, one 64-byte
// record into the thread's own lane, and its lane index stored as the
// thread's current (BEGIN) or last (END) call. No allocation, no lock, no
// syscall. The first traced call of a thread takes the slow path once
// (AttachThread).
#pragma once

#include <signal.h>

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "tracer/clock.h"
#include "tracer/config.h"
#include "tracer/format.h"
#include "tracer/hash.h"
#include "tracer/lane.h"

// Hidden: the wrappers in libhangtrace.so reach the runtime's globals and
// functions directly, not through the GOT and PLT (one load less for each
// of g_trace and g_generation on every call); nothing here is exported.
#pragma GCC visibility push(hidden)
namespace hangtrace {

// The mapped trace file of this process.
struct TraceFile {
  uint8_t* base = nullptr;
  size_t size = 0;
  int fd = -1;
  fmt::FileHeader* header = nullptr;
  fmt::ProcessInfo* process = nullptr;
  fmt::CallInfo* calls = nullptr;
  fmt::CommEntry* comms = nullptr;
  int32_t* members = nullptr;
  fmt::ThreadSlot* threads = nullptr;
  fmt::StackSlot* stacks = nullptr;
  fmt::Record* ring = nullptr;
  fmt::NameEntry* names = nullptr;
  fmt::ModuleEntry* modules = nullptr;  // allocated when first written
  fmt::PyFrame* pyframes = nullptr;     // allocated when first written
  bool modules_allocated = false;
  bool pyframes_allocated = false;
  uint32_t lane_slots = 0;
  uint32_t thread_capacity = 0;
  // A file starts anonymous (O_TMPFILE in the job's folder) and gets its
  // name at the first traced call, stack capture or signal (NameTraceFile):
  // a process that never calls MPI, NCCL or CUDA leaves nothing behind.
  int dir_fd = -1;             // the job's folder, checked once, kept open
  uint32_t naming = 0;         // FileNaming
  uint32_t program_called = 0; // a thread of the program made a traced call
  char stem[160] = {};         // "host.pid": the name's first part
  char path[4096] = {};        // DIR/JOB/host.pid.htrace once named; else DIR/JOB
};
enum FileNaming : uint32_t { kAnonymous = 0, kNaming = 1, kNamed = 2 };

// Null while untraced (HANGTRACE_OFF, a failure, before start-up) and, in a
// process that is no rank, until its first traced call.
extern TraceFile* g_trace;
// The file is made at the first traced call (StartAtFirstCall): set in a
// process that is no rank and in a fork child, until then.
extern bool g_start_pending;
// Slow path of the first traced call of a process started lazily: makes the
// file (once, whichever thread comes first). Returns whether traced.
bool StartAtFirstCall();
// Whether this process traces, or will at its first traced call.
inline bool TraceWanted() {
  return g_trace != nullptr || __atomic_load_n(&g_start_pending, __ATOMIC_RELAXED);
}
// Whether this process traces, making its file if this is its first traced call.
inline bool Traced() {
  if (__builtin_expect(g_trace != nullptr, 1)) return true;
  return __atomic_load_n(&g_start_pending, __ATOMIC_ACQUIRE) && StartAtFirstCall();
}
// Bumped when the trace file changes under running code (fork child):
// threads compare it with their cached one and re-attach.
extern uint32_t g_generation;

// Per-(comm, peer, tag) point-to-point sequence numbers, 1-based. A send
// counts under (comm, dest, tag); a receive under (comm, source, tag), so the
// k-th send from A to B on a tag pairs with B's k-th receive from A on it.
//
// Each thread keeps the streams it used last by their exact fields
// (ThreadState::p2p_streams), in front of the process's table: a hit costs
// a few compares and one atomic add instead of three hashes and a probe.
// In front of those, the stream each direction used last
// (ThreadState::p2p_last): a pipeline stage's sends to the next stage and
// receives from the one before, a ring's, a loop's, are then one pair of
// compares (two more for a call that misses it).
struct P2pStream {
  uint64_t where;   // communicator slot, its reuse count, direction, and
                    // kStreamMark, so that an empty entry (0) matches none
  uint64_t who;     // peer and tag
  uint64_t* count;  // the stream's counter in the process's table
  uint64_t pad;     // 32 bytes: an entry's place is one shift
};
inline constexpr uint64_t kStreamMark = 1ull << 31;
inline constexpr unsigned kP2pStreamBits = 3;

struct ThreadState {
  uint32_t generation = 0;      // g_generation when attached; 0: never
  // g_generation while the record path may take its short way (CallBegin):
  // attached, with a slot, and the record clock the TSC; 0 otherwise. One
  // compare then stands for the three.
  uint32_t fast_generation = 0;
  int32_t tid = 0;
  fmt::ThreadSlot* slot = nullptr;  // null: this thread is not traced
  fmt::Record* lane = nullptr;
  uint64_t lane_mask = 0;
  uint32_t depth = 0;           // traced calls open: the re-entrancy guard
  bool tracer_thread = false;   // hangtrace's own background thread
  uint64_t poll_ticks = 0;      // `current.ticks` of this thread's polling state (0: none)
  // Point-to-point streams this thread used (NextP2pSeqAt): here, so that
  // the wrappers reach them from the same TLS offset as the rest.
  P2pStream p2p_last[2] = {};  // by direction: receive, send
  P2pStream p2p_streams[1u << kP2pStreamBits] = {};
};

// constinit: no dynamic initialization, so an access is one %fs load, with
// no call to a TLS wrapper first.
extern constinit thread_local ThreadState t_thread __attribute__((tls_model("initial-exec")));

// Slow path of the first traced call on a thread (or after fork): claims a
// ThreadSlot and its lane. Returns false when the thread stays untraced.
bool AttachThread(ThreadState& t);

// --- the record path ------------------------------------------------------

// A record for call `call` (index in the file's call table), other fields
// neutral: what every wrapper starts from. A wrapper that sets the
// communicator or the peer on every path says so (`sets`), and they are
// not set twice.
enum RecordSets : unsigned { kSetsNone = 0, kSetsComm = 1, kSetsPeer = 2 };
__attribute__((always_inline)) inline fmt::Record NewRecord(uint16_t call, unsigned sets = kSetsNone) {
  fmt::Record r{};
  r.call = call;
  if (!(sets & kSetsComm)) r.comm = fmt::kNoComm;
  if (!(sets & kSetsPeer)) r.peer = fmt::kNoPeer;
  return r;
}

// The record protocol of a call on thread `t`, whose slot is `s`: its
// BEGIN into the lane, its place published as the thread's current call;
// its END into the lane, its place published as the last call, which ends
// the current one (fmt::ThreadSlot: in a call while current_at > last_at).
// CallBegin/CallEnd use it (and through their slow ways the C API's framework calls).
// Only the lane's other writes (RecordEvent) can overwrite these two
// records while they are published: they move them to the slot first.
__attribute__((always_inline)) inline void PublishBegin(ThreadState& t, fmt::ThreadSlot* s, fmt::Record& r,
                                                        uint64_t ticks) {
  r.ticks = ticks;
  r.tid = uint32_t(t.tid);
  r.kind = uint8_t(fmt::EventKind::kBegin);
  const uint64_t i = LaneWrite(t.lane, t.lane_mask, &s->head, r);
  __atomic_store_n(&s->current_at, i + 1, __ATOMIC_RELEASE);
}
__attribute__((always_inline)) inline void PublishEnd(ThreadState& t, fmt::ThreadSlot* s, fmt::Record& r,
                                                      int32_t result, uint64_t ticks) {
  r.ticks = ticks;
  r.kind = uint8_t(fmt::EventKind::kEnd);
  r.result = result;
  const uint64_t i = LaneWrite(t.lane, t.lane_mask, &s->head, r);
  __atomic_store_n(&s->last_at, i + 1, __ATOMIC_RELEASE);
}

// CallBegin and CallEnd off their short way (runtime.cc): the thread's
// first call (or its first after fork), an untraced thread, another clock.
// Each says whether it recorded; the framework calls of the C API (api.cc),
// which take no guard, go this way.
bool CallBeginSlow(ThreadState& t, fmt::Record& r);
bool CallEndSlow(ThreadState& t, fmt::Record& r, int32_t result);

// What CallBegin did, for its CallEnd: nothing (untraced, or nested in
// another traced call), or a BEGIN on the short way, or on the slow way.
// A BEGIN on the short way makes its END on the short way with no test:
// nothing in between takes the thread's lane or the TSC clock away (a
// fork child, whose file the call's END must not reach, gives the thread a
// scratch lane until it attaches anew: AtForkChild).
enum class Recorded : uint8_t { kNo = 0, kShortWay = 1, kSlowWay = 2 };

// CallBegin where the caller has just found the thread in no traced call
// (the wrappers' Tracing()): the re-entrancy guard is set without a look.
__attribute__((always_inline)) inline Recorded CallBeginOuter(fmt::Record& r) {
  ThreadState& t = t_thread;
  t.depth = 1;
  if (__builtin_expect(t.fast_generation == __atomic_load_n(&g_generation, __ATOMIC_RELAXED), 1)) {
    PublishBegin(t, t.slot, r, TscTicks());
    return Recorded::kShortWay;
  }
  return CallBeginSlow(t, r) ? Recorded::kSlowWay : Recorded::kNo;
}
// Enters a traced call described by `r` (call, comm, seq, count, peer, ...).
// Fills ticks, tid and kind, writes BEGIN, and publishes it as the thread's
// current call. Returns whether and how the call is recorded: kNo when
// untraced or nested inside another traced call (so MPI's internal calls
// are not recorded twice). Pass it to CallEnd, which must always follow.
__attribute__((always_inline)) inline Recorded CallBegin(fmt::Record& r) {
  if (t_thread.depth != 0) {
    ++t_thread.depth;
    return Recorded::kNo;
  }
  return CallBeginOuter(r);
}

// Leaves the call entered by CallBegin. `r` is the BEGIN record (fields may
// be updated, e.g. a receive's resolved source); `result` its return code.
__attribute__((always_inline)) inline void CallEnd(fmt::Record& r, int32_t result, Recorded recorded) {
  ThreadState& t = t_thread;
  --t.depth;
  if (__builtin_expect(recorded == Recorded::kShortWay, 1)) {
    PublishEnd(t, t.slot, r, result, TscTicks());
  } else if (recorded == Recorded::kSlowWay) {
    CallEndSlow(t, r, result);
  }
}

// Waiting by polling (MPI_Test* that retired nothing): the thread's current
// call becomes the poll, published once with the first poll's time (later
// polls, of any call or request, leave it as it is) and never recorded in
// the lane (a loop may poll millions of times); it ends
// when a poll retires a request, or with the next traced call, which
// replaces it. Readers see the thread in the polling call, waiting for the
// peers of its open requests.
void NotePolling(fmt::Record& r);
void EndPolling();

// Writes one standalone record (MARK, COMPLETE, WATCHDOG) on this thread's
// lane, without touching the current call. Returns false when untraced.
bool RecordEvent(fmt::Record& r, fmt::EventKind kind);

// --- tables (slow path; never on the record path) --------------------------

// Adds a call to the file's call table; returns its index or fmt::kNoCall.
// Registering the same name twice returns the first index.
uint16_t RegisterCall(const char* name, fmt::Api api, fmt::Op op, uint8_t flags);

// Claims a communicator slot and fills it (members: `size` world ranks, or
// null when unknown). Returns its index or fmt::kNoComm when the table is
// full or the process untraced.
struct CommDesc {
  uint64_t id = 0;
  uint64_t parent_id = 0;
  fmt::CommKind kind = fmt::CommKind::kUnknown;
  uint8_t flags = 0;
  uint16_t creator_call = fmt::kNoCall;
  int32_t size = 0;
  int32_t my_index = -1;
  int32_t color = -1;
  int32_t key = -1;
  uint32_t parent_counter = 0;
  uint64_t handle = 0;
  int32_t device = -1;
  const char* label = nullptr;
  const int32_t* members = nullptr;  // world rank of each member
};
uint16_t RegisterComm(const CommDesc& d);
void SetCommLabel(uint16_t comm, const char* label);
void MarkCommFreed(uint16_t comm);
// The comm's collective counter: returns the new sequence number (1-based).
// (The runtime's table holds fmt::kMaxComms entries: trace_file.cc lays it
// out with the default capacities.) For a call being recorded: its
// caller's Tracing()/Traced() found the file, which only a fork child's
// own thread could take away, and not during a call of its own.
__attribute__((always_inline)) inline uint64_t NextCollSeq(uint16_t comm) {
  TraceFile* f = g_trace;
  if (__builtin_expect(comm >= fmt::kMaxComms, 0)) return 0;
  uint64_t* seq = &f->comms[comm].coll_seq;
  uint64_t v = __atomic_load_n(seq, __ATOMIC_RELAXED) + 1;  // one caller per comm at a time (MPI rule)
  __atomic_store_n(seq, v, __ATOMIC_RELEASE);
  return v;
}
// Gives back collective number `seq` of `comm` when it is still the last
// one taken (a call refused before it was issued).
inline void GiveBackCollSeq(uint16_t comm, uint64_t seq) {
  if (comm >= fmt::kMaxComms || seq == 0) return;
  uint64_t expected = seq;
  __atomic_compare_exchange_n(&g_trace->comms[comm].coll_seq, &expected, seq - 1, false, __ATOMIC_RELEASE,
                              __ATOMIC_RELAXED);
}
// How many times each communicator slot was taken again (RegisterComm):
// part of a stream's identity, so a slot's new communicator counts from 1.
extern uint32_t g_comm_slot_reuses[fmt::kMaxComms];
// The process's table: the counter of the stream, remembered in `cached`
// as (where, who) once found.
uint64_t NextP2pSeqShared(uint64_t where, uint64_t who, P2pStream* cached);
// A communicator's part of its streams' `where`: its slot, that slot's
// reuses and kStreamMark (the direction bit clear). kNoComm reads the
// reuses of the table's last slot, without a branch: a record with no
// communicator has no sequence number worth keeping apart. The MPI
// wrappers keep it with the communicator they used last, so a message's
// stream costs them no table read.
__attribute__((always_inline)) inline uint64_t StreamWhere(uint16_t comm) {
  const uint64_t reuses = g_comm_slot_reuses[comm & (fmt::kMaxComms - 1)];
  return (reuses << 32) | kStreamMark | (uint64_t(comm) << 1);
}
// The next sequence number of a stream: its communicator's StreamWhere, its
// direction, peer and tag.
__attribute__((always_inline)) inline uint64_t NextP2pSeqAt(uint64_t comm_where, int32_t peer, int32_t tag,
                                                            bool send) {
  const uint64_t where = comm_where | (send ? 1 : 0);
  const uint64_t who = (uint64_t(uint32_t(peer)) << 32) | uint32_t(tag);
  ThreadState& t = t_thread;
  P2pStream& last = t.p2p_last[send ? 1 : 0];
  if (__builtin_expect(last.where == where && last.who == who, 1)) {
    return __atomic_add_fetch(last.count, 1, __ATOMIC_RELAXED);
  }
  P2pStream& c = t.p2p_streams[Bucket<kP2pStreamBits>(where ^ who)];
  const uint64_t seq = (c.where == where && c.who == who) ? __atomic_add_fetch(c.count, 1, __ATOMIC_RELAXED)
                                                          : NextP2pSeqShared(where, who, &c);
  last = c;  // NextP2pSeqShared filled it; with the table full, it still holds a stream of its own
  return seq;
}
__attribute__((always_inline)) inline uint64_t NextP2pSeq(uint16_t comm, int32_t peer, int32_t tag, bool send) {
  return NextP2pSeqAt(StreamWhere(comm), peer, tag, send);
}
// Gives back number `seq` of a stream this thread just counted (its last
// stream that way: NextP2pSeqAt keeps it) when it is still the last taken.
inline void GiveBackP2pSeq(uint16_t comm, int32_t peer, int32_t tag, bool send, uint64_t seq) {
  const uint64_t where = StreamWhere(comm) | (send ? 1 : 0);
  const uint64_t who = (uint64_t(uint32_t(peer)) << 32) | uint32_t(tag);
  P2pStream& last = t_thread.p2p_last[send ? 1 : 0];
  if (seq == 0 || last.where != where || last.who != who || !last.count) return;
  uint64_t expected = seq;
  __atomic_compare_exchange_n(last.count, &expected, seq - 1, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}
// Interns a string (a kernel name) in the file's name table; returns its
// index + 1, or 0 when untraced or the table is full. Slow path.
uint32_t InternName(const char* text);
// Bumps and returns the comm's creation counter (for derived comm ids).
uint32_t NextChildCounter(uint16_t comm);

// Sets the global rank (e.g. from MPI_Comm_rank at MPI_Init).
void SetRank(int32_t rank, int32_t world_size, fmt::RankSource source);
// When the process first had its rank from a communication library (MPI,
// NCCL, torch.distributed's default group), in record ticks; 0: not yet.
// Where a rank that has ended no traced call begins its stretch outside
// calls (background.cc): before it, a process is still starting (importing,
// meeting the others), which is no hang of its own.
uint64_t InitializedTicks();

// --- lifecycle -------------------------------------------------------------

// Starts tracing as configured: a rank (or HANGTRACE_KEEP) opens its trace
// file and starts the background thread now; any other process at its first
// traced call (Traced). `register_calls` enters the wrapped calls into a new
// file's call table. Fails open: on any error prints one line on stderr and
// leaves g_trace null. Returns true when tracing or ready to.
bool StartRuntime(const Config& config, void (*register_calls)() = nullptr);

// Records a normal exit (also run from on_exit for the preloaded library).
// A file with nothing in it (no traced call, stack or signal) whose process
// exits 0 is removed, unless HANGTRACE_KEEP.
void RecordExit(int code);

// Gives the anonymous trace file its name in the job's folder, so that
// readers find it. Async-signal-safe (a fatal signal names it too); a no-op
// once named. Returns whether the file is named.
bool NameTraceFile();

// Captures the stacks of all threads of this process into the file's stack
// table (signals each thread; waits up to `timeout_ms` in all: one deadline
// for every thread). Returns the number captured. Not async-signal-safe;
// not for the record path.
int CaptureAllStacks(fmt::StackReason reason, int timeout_ms);

const Config& RuntimeConfig();

// The stack-capture signal and the fatal-signal recorders (stacks.cc); again
// after a library (MPI) installed its own, to chain to them.
void InstallSignalHandlers();
// sigaction as the program sees it (interpose/signals.cc): the runtime's
// handlers hidden, the program's own taking effect as it asked (signals.cc).
int ProgramSigaction(int sig, const struct sigaction* act, struct sigaction* old);
// A library's initialization (MPI_Init) runs: the handlers it installs are
// the library's, which the runtime stands in front of again afterwards.
void LibraryInitializing(bool running);

// Starts a detached thread of the tracer's own with every signal blocked
// (signals meant for the program never land there); false on failure.
bool StartTracerThread(void* (*main)(void*));

// One line on stderr with write(2); never blocks on stdio locks. Written
// only while fd 2 is the stderr the process started with (a program that
// closed it and reused the number gets nothing into its file); errno kept.
void WriteStderrLine(const char* line);
// The same for a block of lines, written at once.
void WriteStderrBlock(const char* text, size_t n);

}  // namespace hangtrace
#pragma GCC visibility pop
