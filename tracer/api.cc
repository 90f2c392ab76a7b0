// The public C API (include/hangtrace.h), on top of the runtime.
#include "hangtrace.h"

#include <mutex>
#include <unordered_map>

#include "tracer/runtime.h"

using namespace hangtrace;

namespace {
// Regions entered on this thread, so hangtrace_end can finish the record.
constexpr int kMaxDepth = 32;
thread_local fmt::Record t_regions[kMaxDepth];
thread_local Recorded t_recorded[kMaxDepth];
thread_local bool t_outer[kMaxDepth];
thread_local int t_region_depth = 0;
}  // namespace

extern "C" {

__attribute__((visibility("default"))) int hangtrace_enabled(void) { return Traced(); }

// A program that asks for its file means to read or keep it: named now.
__attribute__((visibility("default"))) const char* hangtrace_file(void) {
  return Traced() && NameTraceFile() ? g_trace->path : nullptr;
}

__attribute__((visibility("default"))) int hangtrace_region(const char* name) {
  if (!name || !*name || !Traced()) return -1;
  uint16_t id = RegisterCall(name, fmt::Api::kUser, fmt::Op::kOther, fmt::kCallBlocking);
  return id == fmt::kNoCall ? -1 : int(id);
}

__attribute__((visibility("default"))) int hangtrace_begin(int region, uint64_t arg) {
  if (region < 0 || t_region_depth >= kMaxDepth) return -1;
  fmt::Record& r = t_regions[t_region_depth];
  r = fmt::Record{};
  r.call = uint16_t(region);
  r.comm = fmt::kNoComm;
  r.peer = fmt::kNoPeer;
  r.count = arg;
  // The outermost open call of the thread becomes its current call; a region
  // inside another (or inside a traced call) is still recorded, as events.
  t_outer[t_region_depth] = t_thread.depth == 0;
  t_recorded[t_region_depth] = t_outer[t_region_depth]                       ? CallBegin(r)
                                : RecordEvent(r, fmt::EventKind::kBegin) ? Recorded::kSlowWay
                                                                          : Recorded::kNo;
  ++t_region_depth;
  return 0;
}

__attribute__((visibility("default"))) int hangtrace_end(int region) {
  if (t_region_depth == 0 || t_regions[t_region_depth - 1].call != uint16_t(region)) return -1;
  --t_region_depth;
  fmt::Record& r = t_regions[t_region_depth];
  if (t_outer[t_region_depth]) {
    CallEnd(r, 0, t_recorded[t_region_depth]);
  } else if (t_recorded[t_region_depth] != Recorded::kNo) {
    RecordEvent(r, fmt::EventKind::kEnd);
  }
  return 0;
}

__attribute__((visibility("default"))) int hangtrace_mark(const char* label) {
  if (!label || !Traced()) return -1;
  uint16_t id = RegisterCall(label, fmt::Api::kUser, fmt::Op::kOther, 0);
  fmt::Record r{};
  r.call = id;
  r.comm = fmt::kNoComm;
  r.peer = fmt::kNoPeer;
  return RecordEvent(r, fmt::EventKind::kMark) ? 0 : -1;
}

__attribute__((visibility("default"))) int hangtrace_capture_stacks(void) {
  if (!Traced()) return 0;
  return CaptureAllStacks(fmt::StackReason::kRequest, 200);
}

}  // extern "C"

// --- communication calls of a framework (torch.distributed) ---------------
//
// The Python hook (python/hangtrace_torch.py) records torch.distributed's
// calls through these, as the MPI wrappers record MPI's. A framework call
// is the thread's current call without taking the re-entrancy guard
// (t_thread.depth): the NCCL or MPI call it issues on the same thread is
// recorded too, and is the current call while it runs.

namespace {
constexpr int kMaxFrameworkDepth = 8;
// The thread's open framework calls, innermost last: one initial-exec TLS
// block, as t_thread (three general-dynamic ones cost six __tls_get_addr
// calls per torch call).
struct FrameworkCalls {
  fmt::Record open[kMaxFrameworkDepth];
  bool recorded[kMaxFrameworkDepth];
  int depth;
};
constinit thread_local FrameworkCalls t_framework __attribute__((tls_model("initial-exec"))) = {};

// Posted nonblocking calls (isend/irecv/async_op=True) until their work
// ends: a handful at a time, written at Python's pace, so a lock is fine.
std::mutex g_posted_mu;
std::unordered_map<uint64_t, fmt::Record>* g_posted = nullptr;

// A framework call's BEGIN as the thread's current call (without the
// re-entrancy guard), and its END: the protocol of CallBegin/CallEnd, on
// its short way where the thread's is (ThreadState::fast_generation: the
// slot attached in this process, the TSC the clock).
bool FrameworkBegin(fmt::Record& r) {
  ThreadState& t = t_thread;
  if (__builtin_expect(t.fast_generation == __atomic_load_n(&g_generation, __ATOMIC_RELAXED), 1)) {
    PublishBegin(t, t.slot, r, TscTicks());
    return true;
  }
  return CallBeginSlow(t, r);
}
bool FrameworkEnd(fmt::Record& r, int32_t result) {
  ThreadState& t = t_thread;
  if (__builtin_expect(t.fast_generation == __atomic_load_n(&g_generation, __ATOMIC_RELAXED), 1)) {
    PublishEnd(t, t.slot, r, result, TscTicks());
    return true;
  }
  return CallEndSlow(t, r, result);
}

// A receive from any source learns its source when it ends: its
// point-to-point sequence number is counted then (as ResolveReceive does).
void Resolve(fmt::Record& r, int peer, int tag) {
  if (r.seq != 0 || !(r.flags & fmt::kRecAnyPeer) || peer < 0) return;
  r.peer = peer;
  if (tag >= 0) r.tag = tag;
  r.seq = NextP2pSeq(r.comm, r.peer, r.tag, false);
}
}  // namespace

extern "C" {

__attribute__((visibility("default"))) int hangtrace_call_register(const char* name, int api, int op, unsigned flags) {
  if (!name || !*name || !Traced()) return -1;
  uint16_t id = RegisterCall(name, fmt::Api(api), fmt::Op(op), uint8_t(flags));
  return id == fmt::kNoCall ? -1 : int(id);
}

__attribute__((visibility("default"))) int hangtrace_comm_register(uint64_t id, const char* label, int size,
                                                                   int my_index, const int32_t* world_ranks) {
  if (!id || size <= 0 || my_index < 0 || my_index >= size || !Traced()) return -1;
  CommDesc d;
  d.id = id;
  d.kind = fmt::CommKind::kTorch;
  d.flags = world_ranks ? uint8_t(fmt::kCommMembersKnown) : uint8_t(0);
  d.size = size;
  d.my_index = my_index;
  d.label = label && *label ? label : nullptr;
  d.members = world_ranks;
  uint16_t comm = RegisterComm(d);
  return comm == fmt::kNoComm ? -1 : int(comm);
}

__attribute__((visibility("default"))) int hangtrace_comm_free(int comm) {
  if (comm < 0 || !g_trace) return -1;
  MarkCommFreed(uint16_t(comm));
  return 0;
}

__attribute__((visibility("default"))) int hangtrace_set_rank(int rank, int world_size) {
  if (rank < 0 || world_size <= rank || !Traced()) return -1;
  // MPI_Comm_rank at MPI_Init is the rank MPI matches by; the default
  // process group's is torch's (it may differ from $RANK when the program
  // passed its own rank to init_process_group).
  if (g_trace->process->rank_source == uint8_t(fmt::RankSource::kMpi)) return 0;
  SetRank(rank, world_size, fmt::RankSource::kTorch);
  return 0;
}

// Enters a call (blocking: the thread's current call until
// hangtrace_call_end), or posts one (nonblocking: `handle` names it until
// hangtrace_request_end). `peer` is the communicator's rank, -2 any source.
// Returns 0 when recorded, 1 when not (untraced), -1 on bad arguments.
__attribute__((visibility("default"))) int hangtrace_call_begin(int call, int comm, int peer, int tag, uint64_t count,
                                                                int dtype, int redop, uint64_t handle) {
  if (call < 0 || !g_trace || uint32_t(call) >= g_trace->header->counters.call_count) return -1;
  const uint8_t flags = g_trace->calls[call].flags;
  const bool nonblocking = flags & fmt::kCallNonblocking;
  FrameworkCalls& open = t_framework;
  if (nonblocking ? !handle : open.depth >= kMaxFrameworkDepth) return -1;
  fmt::Record r = NewRecord(uint16_t(call));
  r.comm = comm >= 0 ? uint16_t(comm) : fmt::kNoComm;
  r.peer = peer;
  r.tag = tag;
  r.count = count;
  r.dtype = uint8_t(dtype);
  r.redop = uint8_t(redop);
  r.handle = handle;
  if (peer == fmt::kAnyPeer) r.flags |= fmt::kRecAnyPeer;
  if (r.comm != fmt::kNoComm) {
    if (flags & fmt::kCallCollective) r.seq = NextCollSeq(r.comm);
    else if ((flags & fmt::kCallP2p) && peer >= 0)
      r.seq = NextP2pSeq(r.comm, peer, tag, fmt::Op(g_trace->calls[call].op) == fmt::Op::kSend);
  }
  if (nonblocking) {  // a posted call: an event, as MPI's Isend (Posted)
    if (!RecordEvent(r, fmt::EventKind::kBegin)) return 1;
    std::lock_guard<std::mutex> lock(g_posted_mu);
    if (!g_posted) g_posted = new std::unordered_map<uint64_t, fmt::Record>();
    if (g_posted->size() < 65536) (*g_posted)[handle] = r;
    return 0;
  }
  const bool recorded = FrameworkBegin(r);
  open.open[open.depth] = r;
  open.recorded[open.depth] = recorded;
  ++open.depth;
  return recorded ? 0 : 1;
}

// Leaves the thread's innermost blocking call; `peer`/`tag` resolve a
// receive from any source (-1 when unknown).
__attribute__((visibility("default"))) int hangtrace_call_end(int result, int peer, int tag) {
  FrameworkCalls& open = t_framework;
  if (open.depth == 0) return -1;
  --open.depth;
  fmt::Record& r = open.open[open.depth];
  if (!open.recorded[open.depth]) return 1;
  Resolve(r, peer, tag);
  return FrameworkEnd(r, result) ? 0 : 1;
}

namespace {
// The posted call `handle`, taken from the calls still posted; false when
// it is not one of them.
bool TakePosted(uint64_t handle, fmt::Record* r) {
  std::lock_guard<std::mutex> lock(g_posted_mu);
  if (!g_posted) return false;
  auto it = g_posted->find(handle);
  if (it == g_posted->end()) return false;
  *r = it->second;
  g_posted->erase(it);
  return true;
}
}  // namespace

// The posted call `handle` ended (its work was waited on, or completed).
__attribute__((visibility("default"))) int hangtrace_request_end(uint64_t handle, int peer, int tag) {
  fmt::Record r;
  if (!TakePosted(handle, &r)) return 1;
  Resolve(r, peer, tag);
  r.tid = 0;  // the thread that ends it (as MPI's Retire)
  r.result = 0;
  return RecordEvent(r, fmt::EventKind::kEnd) ? 0 : 1;
}

// A framework call refused before it was issued: it gives back its
// sequence number and ends marked (fmt::kRecNotIssued).
namespace {
void GiveBack(const fmt::Record& r) {
  const uint8_t flags = g_trace->calls[r.call].flags;
  if (flags & fmt::kCallCollective) {
    GiveBackCollSeq(r.comm, r.seq);
  } else if ((flags & fmt::kCallP2p) && r.peer >= 0 && !(r.flags & fmt::kRecAnyPeer)) {
    GiveBackP2pSeq(r.comm, r.peer, r.tag, fmt::Op(g_trace->calls[r.call].op) == fmt::Op::kSend, r.seq);
  }
  __atomic_fetch_add(&g_trace->header->counters.calls_not_issued, 1, __ATOMIC_RELAXED);
}
}  // namespace

__attribute__((visibility("default"))) int hangtrace_call_not_issued(void) {
  FrameworkCalls& open = t_framework;
  if (open.depth == 0) return -1;
  --open.depth;
  fmt::Record& r = open.open[open.depth];
  if (!open.recorded[open.depth]) return 1;
  GiveBack(r);
  r.flags |= fmt::kRecNotIssued;
  return FrameworkEnd(r, 1) ? 0 : 1;
}

__attribute__((visibility("default"))) int hangtrace_request_not_issued(uint64_t handle) {
  fmt::Record r;
  if (!TakePosted(handle, &r)) return 1;
  GiveBack(r);
  r.flags |= fmt::kRecNotIssued;
  r.result = 1;
  return RecordEvent(r, fmt::EventKind::kEnd) ? 0 : 1;
}

}  // extern "C"
