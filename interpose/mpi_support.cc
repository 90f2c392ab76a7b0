#include "interpose/mpi_support.h"
#include "interpose/mpi_weak.h"

#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tracer/handle_map.h"
#include "tracer/hash.h"
#include "tracer/internal.h"

namespace hangtrace::mpi {
namespace {


// A non-zero 64-bit key for any MPI handle type (pointers in OpenMPI,
// integers in MPICH).
template <typename H>
uint64_t HandleKey(H h) {
  uint64_t k;
  if constexpr (std::is_pointer_v<H>) {
    k = reinterpret_cast<uintptr_t>(h);
  } else {
    k = uint64_t(uint32_t(h)) | (1ull << 62);
  }
  return k < 3 ? k + (1ull << 63) : k;  // 0, 1, 2 are the tables' markers
}

// --- the real functions ------------------------------------------------------

#define HT_PMPI(fn) (*Real(g_##fn, "P" #fn))
decltype(&PMPI_Comm_size) g_MPI_Comm_size;
decltype(&PMPI_Comm_rank) g_MPI_Comm_rank;
decltype(&PMPI_Comm_test_inter) g_MPI_Comm_test_inter;
decltype(&PMPI_Comm_group) g_MPI_Comm_group;
decltype(&PMPI_Comm_remote_group) g_MPI_Comm_remote_group;
decltype(&PMPI_Group_size) g_MPI_Group_size;
decltype(&PMPI_Group_translate_ranks) g_MPI_Group_translate_ranks;
decltype(&PMPI_Group_free) g_MPI_Group_free;
decltype(&PMPI_Initialized) g_MPI_Initialized;
decltype(&PMPI_Finalized) g_MPI_Finalized;

// --- datatypes and reductions --------------------------------------------------

uint8_t DtypeSlow(MPI_Datatype d);
uint8_t RedopSlow(MPI_Op op);

// A small direct-mapped cache from handle to neutral enum, filled from the
// lists below on a miss; one 64-bit word per entry (key << 8 | value), so a
// lookup is one load and no lock.
struct EnumCache {
  uint64_t slots[256] = {};
  int Lookup(uint64_t key) const {
    uint64_t v = __atomic_load_n(&slots[Mix(key) & 255], __ATOMIC_RELAXED);
    return (v >> 8) == (key & 0x00ffffffffffffffull) ? int(v & 0xff) : -1;
  }
  void Store(uint64_t key, uint8_t value) {
    __atomic_store_n(&slots[Mix(key) & 255], ((key & 0x00ffffffffffffffull) << 8) | value, __ATOMIC_RELAXED);
  }
  // The cached value of `handle`, computed by `slow` on a miss.
  template <typename H>
  uint8_t Get(H handle, uint8_t (*slow)(H)) {
    uint64_t key = HandleKey(handle);
    int v = Lookup(key);
    if (v >= 0) return uint8_t(v);
    uint8_t computed = slow(handle);
    Store(key, computed);
    return computed;
  }
};
EnumCache g_dtype_cache, g_redop_cache;

uint8_t DtypeSlow(MPI_Datatype d) {
  const std::pair<MPI_Datatype, fmt::Dtype> table[] = {
      {MPI_CHAR, fmt::Dtype::kChar},           {MPI_SIGNED_CHAR, fmt::Dtype::kInt8},
      {MPI_UNSIGNED_CHAR, fmt::Dtype::kUint8}, {MPI_BYTE, fmt::Dtype::kByte},
      {MPI_SHORT, fmt::Dtype::kInt16},         {MPI_UNSIGNED_SHORT, fmt::Dtype::kUint16},
      {MPI_INT, fmt::Dtype::kInt32},           {MPI_UNSIGNED, fmt::Dtype::kUint32},
      {MPI_LONG, fmt::Dtype::kInt64},          {MPI_UNSIGNED_LONG, fmt::Dtype::kUint64},
      {MPI_LONG_LONG, fmt::Dtype::kInt64},     {MPI_UNSIGNED_LONG_LONG, fmt::Dtype::kUint64},
      {MPI_INT8_T, fmt::Dtype::kInt8},         {MPI_UINT8_T, fmt::Dtype::kUint8},
      {MPI_INT16_T, fmt::Dtype::kInt16},       {MPI_UINT16_T, fmt::Dtype::kUint16},
      {MPI_INT32_T, fmt::Dtype::kInt32},       {MPI_UINT32_T, fmt::Dtype::kUint32},
      {MPI_INT64_T, fmt::Dtype::kInt64},       {MPI_UINT64_T, fmt::Dtype::kUint64},
      {MPI_FLOAT, fmt::Dtype::kFloat32},       {MPI_DOUBLE, fmt::Dtype::kFloat64},
      {MPI_LONG_DOUBLE, fmt::Dtype::kLongDouble}, {MPI_C_BOOL, fmt::Dtype::kBool},
      {MPI_FLOAT_INT, fmt::Dtype::kPair},      {MPI_DOUBLE_INT, fmt::Dtype::kPair},
      {MPI_LONG_INT, fmt::Dtype::kPair},       {MPI_2INT, fmt::Dtype::kPair},
      {MPI_SHORT_INT, fmt::Dtype::kPair},      {MPI_LONG_DOUBLE_INT, fmt::Dtype::kPair},
  };
  for (const auto& [h, v] : table) {
    if (h == d) return uint8_t(v);
  }
  return uint8_t(d == MPI_DATATYPE_NULL ? fmt::Dtype::kNone : fmt::Dtype::kOther);
}

uint8_t RedopSlow(MPI_Op op) {
  const std::pair<MPI_Op, fmt::Redop> table[] = {
      {MPI_SUM, fmt::Redop::kSum},   {MPI_PROD, fmt::Redop::kProd},     {MPI_MAX, fmt::Redop::kMax},
      {MPI_MIN, fmt::Redop::kMin},   {MPI_BAND, fmt::Redop::kBand},     {MPI_BOR, fmt::Redop::kBor},
      {MPI_BXOR, fmt::Redop::kBxor}, {MPI_LAND, fmt::Redop::kLand},     {MPI_LOR, fmt::Redop::kLor},
      {MPI_LXOR, fmt::Redop::kLxor}, {MPI_MAXLOC, fmt::Redop::kMaxloc}, {MPI_MINLOC, fmt::Redop::kMinloc},
      {MPI_REPLACE, fmt::Redop::kReplace},
  };
  for (const auto& [h, v] : table) {
    if (h == op) return uint8_t(v);
  }
  return uint8_t(op == MPI_OP_NULL ? fmt::Redop::kNone : fmt::Redop::kOther);
}

// --- communicators -------------------------------------------------------------

// Handle -> index in the file's comm table (writers hold g_comm_lock).
HandleMap<8192> g_comm_map;
pthread_mutex_t g_comm_lock = PTHREAD_MUTEX_INITIALIZER;
// MPI_Comm_create_group and intercomms: creations so far per (parent, members)
// key, since no parent-wide counter is shared by every member.
std::map<uint64_t, uint32_t>* g_keyed_counters;

// World ranks of a communicator's members (local group, then the remote
// group of an intercomm), by local group translation: no communication.
std::vector<int32_t> WorldRanks(MPI_Comm comm, bool remote) {
  std::vector<int32_t> out;
  MPI_Group group, world;
  if ((remote ? HT_PMPI(MPI_Comm_remote_group)(comm, &group) : HT_PMPI(MPI_Comm_group)(comm, &group)) !=
      MPI_SUCCESS) {
    return out;
  }
  HT_PMPI(MPI_Comm_group)(MPI_COMM_WORLD, &world);
  int n = 0;
  HT_PMPI(MPI_Group_size)(group, &n);
  std::vector<int> in(size_t(std::max(n, 0))), ranks(size_t(std::max(n, 0)));
  for (int i = 0; i < n; ++i) in[size_t(i)] = i;
  if (n > 0 && HT_PMPI(MPI_Group_translate_ranks)(group, n, in.data(), world, ranks.data()) == MPI_SUCCESS) {
    out.assign(ranks.begin(), ranks.end());
  }
  HT_PMPI(MPI_Group_free)(&group);
  HT_PMPI(MPI_Group_free)(&world);
  return out;
}

uint64_t HashRanks(const std::vector<int32_t>& ranks) {
  uint64_t h = 0x6d656d62657273ull;  // "members"
  for (int32_t r : ranks) h = Combine(h, uint64_t(uint32_t(r)));
  return h;
}

struct NewComm {
  uint64_t id = 0;
  uint64_t parent_id = 0;
  uint16_t creator_call = fmt::kNoCall;
  int color = -1, key = -1;
  uint32_t parent_counter = 0;
  const char* label = nullptr;
  bool world = false;
};

// Registers `comm` (g_comm_lock held) and returns its index.
// `facts`: the comm to ask for size, rank and kind (the parent for a comm
// that is not usable yet).
uint16_t RegisterLocked(MPI_Comm comm, MPI_Comm facts, const NewComm& n, const std::vector<int32_t>& members) {
  CommDesc d;
  d.id = n.id;
  d.parent_id = n.parent_id;
  d.kind = fmt::CommKind::kMpi;
  d.creator_call = n.creator_call;
  d.color = n.color;
  d.key = n.key;
  d.parent_counter = n.parent_counter;
  d.handle = HandleKey(comm);
  d.label = n.label;
  int inter = 0;
  HT_PMPI(MPI_Comm_test_inter)(facts, &inter);
  int size = 0, rank = -1;
  HT_PMPI(MPI_Comm_size)(facts, &size);
  HT_PMPI(MPI_Comm_rank)(facts, &rank);
  d.size = size;
  d.my_index = rank;
  if (inter) d.flags |= fmt::kCommInter;
  if (n.world) {
    d.flags |= fmt::kCommWorld;
  } else if (!members.empty()) {
    d.members = members.data();
    d.size = int32_t(members.size());
  }
  uint16_t index = RegisterComm(d);
  if (index != fmt::kNoComm) g_comm_map.Map(HandleKey(comm), index);
  return index;
}

uint64_t CommIdOf(uint16_t index) {
  if (!g_trace || index >= fmt::kMaxComms) return 0;
  return g_trace->comms[index].id;
}

int32_t WorldRank() { return g_trace ? g_trace->process->rank : -1; }

// --- pending requests ------------------------------------------------------------

// Markers of the request table's keys (HandleKey never returns them).
constexpr uint64_t kEmpty = 0, kTomb = 1, kBusy = 2;

struct RequestSlot {
  uint64_t key;
  fmt::Record rec;
};
constexpr size_t kRequestsSize = 1 << 16;
RequestSlot g_requests[kRequestsSize];

void Remember(uint64_t key, const fmt::Record& r) {
  size_t tomb = SIZE_MAX;
  for (size_t i = Mix(key) & (kRequestsSize - 1), n = 0; n < kRequestsSize; i = (i + 1) & (kRequestsSize - 1), ++n) {
    uint64_t k = __atomic_load_n(&g_requests[i].key, __ATOMIC_ACQUIRE);
    size_t at = SIZE_MAX;
    if (k == key) at = i;  // a stale entry of a recycled handle
    else if (k == kTomb && tomb == SIZE_MAX) tomb = i;
    else if (k == kEmpty) at = tomb != SIZE_MAX ? tomb : i;
    if (at == SIZE_MAX) continue;
    uint64_t expected = g_requests[at].key;
    if (expected == kBusy ||
        !__atomic_compare_exchange_n(&g_requests[at].key, &expected, kBusy, false, __ATOMIC_ACQ_REL,
                                     __ATOMIC_RELAXED)) {
      tomb = SIZE_MAX;  // lost the race: look again from here
      continue;
    }
    g_requests[at].rec = r;
    __atomic_store_n(&g_requests[at].key, key, __ATOMIC_RELEASE);
    return;
  }
  if (g_trace) __atomic_fetch_add(&g_trace->header->counters.dropped, 1, __ATOMIC_RELAXED);
}

bool Take(uint64_t key, fmt::Record* out) {
  for (size_t i = Mix(key) & (kRequestsSize - 1), n = 0; n < kRequestsSize; i = (i + 1) & (kRequestsSize - 1), ++n) {
    uint64_t k = __atomic_load_n(&g_requests[i].key, __ATOMIC_ACQUIRE);
    if (k == key) {
      *out = g_requests[i].rec;
      __atomic_store_n(&g_requests[i].key, kTomb, __ATOMIC_RELEASE);
      return true;
    }
    if (k == kEmpty) return false;
  }
  return false;
}

thread_local std::vector<MPI_Request>* t_saved;
thread_local std::vector<MPI_Status>* t_statuses;

}  // namespace

// ---------------------------------------------------------------------------

void* ResolveReal(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (!f) f = dlsym(RTLD_DEFAULT, name);
  if (!f) {
    // An MPI library opened with RTLD_LOCAL (e.g. by a Python extension).
    for (const char* lib : {"libmpi.so.40", "libmpi.so.12", "libmpi.so"}) {
      if (void* h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD)) {
        f = dlsym(h, name);
        if (f) break;
      }
    }
  }
  if (!f) {
    char line[200];
    snprintf(line, sizeof(line), "hangtrace: cannot find %s in any loaded MPI library; aborting", name);
    WriteStderrLine(line);
    abort();
  }
  return f;
}

uint8_t Dtype(MPI_Datatype d) { return g_dtype_cache.Get(d, DtypeSlow); }

uint8_t Redop(MPI_Op op) { return g_redop_cache.Get(op, RedopSlow); }

void SetPeer(fmt::Record& r, int peer) {
  if (peer >= 0) {
    r.peer = peer;
  } else if (peer == MPI_ANY_SOURCE) {
    r.peer = fmt::kAnyPeer;
    r.flags |= fmt::kRecAnyPeer;
  } else if (peer == MPI_PROC_NULL) {
    r.peer = fmt::kNullPeer;
  } else {
    r.peer = fmt::kNoPeer;
  }
}

void SetTag(fmt::Record& r, int tag) {
  if (tag == MPI_ANY_TAG) {
    r.tag = fmt::kAnyTag;
    r.flags |= fmt::kRecAnyTag;
  } else {
    r.tag = tag;
  }
}

uint16_t CommIndex(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return fmt::kNoComm;
  uint64_t key = HandleKey(comm);
  int found = g_comm_map.Find(key);
  if (found >= 0) return uint16_t(found);
  // First sight: the world or self before MPI_Init returned to us, or a comm
  // made by a call we do not wrap (MPI_Cart_create, MPI_Intercomm_merge...).
  int init = 0, fin = 0;
  HT_PMPI(MPI_Initialized)(&init);
  HT_PMPI(MPI_Finalized)(&fin);
  if (!init || fin) return fmt::kNoComm;
  pthread_mutex_lock(&g_comm_lock);
  found = g_comm_map.Find(key);
  uint16_t index = found >= 0 ? uint16_t(found) : fmt::kNoComm;
  if (found < 0) {
    NewComm n;
    std::vector<int32_t> members;
    if (comm == MPI_COMM_WORLD) {
      n.id = kWorldCommId;
      n.label = "world";
      n.world = true;
    } else if (comm == MPI_COMM_SELF) {
      n.id = Combine(HashString("self"), uint64_t(uint32_t(WorldRank())));
      n.label = "self";
      members.push_back(WorldRank());
    } else {
      members = WorldRanks(comm, false);
      if (!g_keyed_counters) g_keyed_counters = new std::map<uint64_t, uint32_t>();
      uint64_t k = Combine(HashString("unwrapped"), HashRanks(members));
      n.id = Combine(k, ++(*g_keyed_counters)[k]);
    }
    index = RegisterLocked(comm, comm, n, members);
  }
  pthread_mutex_unlock(&g_comm_lock);
  return index;
}

void CommCreated(uint16_t call, MPI_Comm parent, MPI_Comm newcomm, int color, int key,
                 bool collective_over_parent, bool facts_from_parent) {
  if (!g_trace) return;
  uint16_t parent_index = CommIndex(parent);
  uint64_t parent_id = CommIdOf(parent_index);
  // Every member of the parent counts the creation, also those that get
  // MPI_COMM_NULL (color MPI_UNDEFINED), so the counters stay in step.
  uint32_t counter = collective_over_parent ? NextChildCounter(parent_index) : 0;
  if (newcomm == MPI_COMM_NULL) return;
  const char* call_name = call < g_trace->header->counters.call_count ? g_trace->calls[call].name : "?";

  pthread_mutex_lock(&g_comm_lock);
  const MPI_Comm facts = facts_from_parent ? parent : newcomm;
  int inter = 0;
  HT_PMPI(MPI_Comm_test_inter)(facts, &inter);
  std::vector<int32_t> members = WorldRanks(facts, false);
  NewComm n;
  n.parent_id = parent_id;
  n.creator_call = call;
  n.color = color;
  n.key = key;
  n.parent_counter = counter;
  uint64_t id = Combine(HashString(call_name), HashRanks(members));
  if (inter) {
    // Both sides must agree: hash the union of both groups, in rank order,
    // and count per union (the two sides' parents differ).
    std::vector<int32_t> all = members, remote = WorldRanks(facts, true);
    all.insert(all.end(), remote.begin(), remote.end());
    std::sort(all.begin(), all.end());
    if (!g_keyed_counters) g_keyed_counters = new std::map<uint64_t, uint32_t>();
    uint64_t k = Combine(HashString("intercomm"), HashRanks(all));
    n.id = Combine(k, ++(*g_keyed_counters)[k]);
  } else if (collective_over_parent) {
    n.id = Combine(Combine(Combine(parent_id, id), uint64_t(uint32_t(color))), counter);
  } else {
    if (!g_keyed_counters) g_keyed_counters = new std::map<uint64_t, uint32_t>();
    uint64_t k = Combine(Combine(parent_id, id), uint64_t(uint32_t(key)));  // key: the tag
    n.id = Combine(k, ++(*g_keyed_counters)[k]);
  }
  RegisterLocked(newcomm, facts, n, members);
  pthread_mutex_unlock(&g_comm_lock);
}

void CommFreeing(MPI_Comm comm) {
  if (comm == MPI_COMM_NULL) return;
  uint64_t key = HandleKey(comm);
  int index = g_comm_map.Find(key);
  if (index >= 0) MarkCommFreed(uint16_t(index));
  pthread_mutex_lock(&g_comm_lock);
  g_comm_map.Unmap(key);
  pthread_mutex_unlock(&g_comm_lock);
}

void CommNamed(MPI_Comm comm, const char* name) {
  uint16_t index = CommIndex(comm);
  if (index != fmt::kNoComm && name) SetCommLabel(index, name);
}


void SequenceReceive(fmt::Record& r) {
  if (r.peer >= 0 && !(r.flags & fmt::kRecAnyTag)) r.seq = NextP2pSeq(r.comm, r.peer, r.tag, false);
}

void ResolveReceive(fmt::Record& r, const MPI_Status* status) {
  if (!status || r.seq != 0) return;
  if (r.flags & fmt::kRecAnyPeer) r.peer = status->MPI_SOURCE;
  if (r.flags & fmt::kRecAnyTag) r.tag = status->MPI_TAG;
  if (r.peer >= 0) r.seq = NextP2pSeq(r.comm, r.peer, r.tag, false);
}

void Posted(fmt::Record& r, MPI_Request request) {
  if (request == MPI_REQUEST_NULL) return;
  r.handle = HandleKey(request);
  if (!RecordEvent(r, fmt::EventKind::kBegin)) return;
  Remember(r.handle, r);
}

uint64_t RequestKey(MPI_Request request) { return HandleKey(request); }

void MatchedReceive(fmt::Record& r) {
  r.peer = fmt::kAnyPeer;
  r.tag = fmt::kAnyTag;
  r.flags |= fmt::kRecAnyPeer | fmt::kRecAnyTag;
}

MPI_Request* SaveRequests(int count, const MPI_Request* requests) {
  if (!t_saved) t_saved = new std::vector<MPI_Request>();
  size_t n = size_t(std::max(count, 0));
  if (t_saved->size() < n) t_saved->resize(n);  // grows rarely; then no allocation
  std::copy(requests, requests + n, t_saved->begin());
  return t_saved->data();
}

MPI_Status* StatusBuffer(MPI_Status* given, bool ignored, int count) {
  if (!ignored) return given;
  if (!t_statuses) t_statuses = new std::vector<MPI_Status>();
  size_t n = size_t(std::max(count, 1));
  if (t_statuses->size() < n) t_statuses->resize(n);
  return t_statuses->data();
}

void Retire(MPI_Request saved, const MPI_Status* status) {
  if (saved == MPI_REQUEST_NULL || !g_trace) return;
  fmt::Record r;
  if (!Take(HandleKey(saved), &r)) return;  // not posted by a traced call
  if (r.call < g_trace->header->counters.call_count &&
      fmt::Op(g_trace->calls[r.call].op) == fmt::Op::kRecv) {
    ResolveReceive(r, status);
  }
  r.tid = 0;
  r.result = 0;
  RecordEvent(r, fmt::EventKind::kEnd);
}

bool g_mpi_enabled = false;

bool MpiNotLinked() {
  static bool said = false;
  if (!said) {
    said = true;
    WriteStderrLine(
        "hangtrace: MPI called, but no Open MPI library was loaded with the program (dlopen'ed "
        "later, or another MPI): the MPI calls of this process are not traced");
  }
  return false;
}

void RegisterMpiCalls() {
  // Open MPI linked into the program: its handles resolved at our load.
  g_mpi_enabled = &ompi_mpi_comm_world != nullptr;
  for (int i = 0; i < kNumMpiCalls; ++i) {
    g_mpi_call[i] = RegisterCall(kMpiCalls[i].name, fmt::Api::kMpi, kMpiCalls[i].op, kMpiCalls[i].flags);
  }
}

void Initialized(int provided_level) {
  if (!g_trace) return;
  int rank = -1, size = -1;
  HT_PMPI(MPI_Comm_rank)(MPI_COMM_WORLD, &rank);
  HT_PMPI(MPI_Comm_size)(MPI_COMM_WORLD, &size);
  SetRank(rank, size, fmt::RankSource::kMpi);
  g_trace->process->mpi_thread_level = provided_level;
  CommIndex(MPI_COMM_WORLD);
  CommIndex(MPI_COMM_SELF);
  // MPI_Init installed the MPI library's own fatal-signal handlers over ours;
  // take them back, chaining to the library's.
  if (RuntimeConfig().stacks) InstallSignalHandlers();
}

}  // namespace hangtrace::mpi
