// NCCL's half of the GPU wrappers: communicator identity and the life-cycle
// hooks of gpu.spec, datatypes and reductions. RCCL exports the same
// symbols and ABI, so this covers it too.
//
// Communicator ids are computed locally and agree on every member:
//   ncclCommInitRank(Config)   H(the ncclUniqueId's bytes)
//   ncclCommInitRankScalable   H(the first ncclUniqueId's bytes)
//   ncclCommSplit              H(parent id, "split", color, parent's split counter)
//   ncclCommShrink             H(parent id, "shrink", counter, excluded ranks)
//   ncclCommInitAll            local to the process (all its devices)
// Every member of a parent calls Split in the same order (NCCL requires it,
// colour NCCL_SPLIT_NOCOLOR included), so the counters agree.
#include <dlfcn.h>
#include <nccl.h>
#include <pthread.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "gpu_nccl.gen.h"
#include "interpose/gpu_support.h"
#include "tracer/handle_map.h"
#include "tracer/hash.h"

namespace hangtrace::gpu {
namespace {

// --- the comm table: ncclComm_t -> index, read lock-free -------------------------

HandleMap<8192> g_table;  // writers hold g_lock
pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
uint32_t g_initall_counter = 0;
uint8_t g_async_reported[fmt::kMaxComms];

// NCCL's query calls (not wrapped), found like the wrapped ones.
template <typename F>
F Query(const char* name) {
  return FindLoaded<F>(name, fmt::Api::kNccl);
}

fmt::CommKind Kind() {
  static fmt::CommKind kind = [] {
    void* h = dlopen("librccl.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (h) dlclose(h);
    return h ? fmt::CommKind::kRccl : fmt::CommKind::kNccl;
  }();
  return kind;
}

// Registers a communicator this process just joined. `rank`/`size` of -1/0
// are asked of NCCL (which may not know yet: a nonblocking communicator).
uint16_t Register(ncclComm_t comm, uint64_t id, uint64_t parent_id, uint16_t creator, int rank, int size,
                  int color, int key, uint32_t counter, const char* label) {
  if (!comm) return fmt::kNoComm;
  static auto user_rank = Query<decltype(&ncclCommUserRank)>("ncclCommUserRank");
  static auto count = Query<decltype(&ncclCommCount)>("ncclCommCount");
  static auto device = Query<decltype(&ncclCommCuDevice)>("ncclCommCuDevice");
  int r = rank, n = size, dev = -1;
  if (r < 0 && user_rank && user_rank(comm, &r) != ncclSuccess) r = -1;
  if (n <= 0 && count && count(comm, &n) != ncclSuccess) n = 0;
  if (device && device(comm, &dev) != ncclSuccess) dev = -1;
  CommDesc d;
  d.id = id;
  d.parent_id = parent_id;
  d.kind = Kind();
  d.creator_call = creator;
  d.size = n;
  d.my_index = r;
  d.color = color;
  d.key = key;
  d.parent_counter = counter;
  d.handle = reinterpret_cast<uintptr_t>(comm);
  d.device = dev;
  d.label = label;
  pthread_mutex_lock(&g_lock);
  uint16_t index = RegisterComm(d);
  if (index != fmt::kNoComm) g_table.Map(reinterpret_cast<uintptr_t>(comm), index);
  pthread_mutex_unlock(&g_lock);
  // A job launched without MPI (torchrun sets RANK; a bare program nothing):
  // the first communicator's rank is the best rank there is.
  if (g_trace && g_trace->process->rank < 0 && rank >= 0) SetRank(rank, size, fmt::RankSource::kNccl);
  return index;
}

uint64_t IdOf(const ncclUniqueId& u) { return Combine(HashString("nccl"), HashBytes(u.internal, sizeof(u.internal))); }

uint64_t ParentId(uint16_t parent) {
  return parent != fmt::kNoComm && g_trace ? g_trace->comms[parent].id : 0;
}

// The name a config gives the communicator, when its struct has the field.
const char* ConfigName(const ncclConfig_t* c) {
  if (!c || c->magic != 0xcafebeef || c->size < offsetof(ncclConfig_t, commName) + sizeof(c->commName)) return nullptr;
  return c->version >= NCCL_VERSION(2, 17, 0) ? c->commName : nullptr;
}

}  // namespace

uint16_t NcclComm(const void* comm) {
  if (!comm) return fmt::kNoComm;
  int index = g_table.Find(reinterpret_cast<uintptr_t>(comm));
  if (index >= 0) return uint16_t(index);
  // Created before tracing began or by a call not wrapped: known only here.
  uint64_t id = Combine(Combine(HashString("nccl-unseen"), uint64_t(getpid())), reinterpret_cast<uintptr_t>(comm));
  return Register(static_cast<ncclComm_t>(const_cast<void*>(comm)), id, 0, fmt::kNoCall, -1, 0, -1, -1, 0, nullptr);
}

uint8_t NcclDtype(int d) {
  switch (d) {
    case ncclInt8: return uint8_t(fmt::Dtype::kInt8);
    case ncclUint8: return uint8_t(fmt::Dtype::kUint8);
    case ncclInt32: return uint8_t(fmt::Dtype::kInt32);
    case ncclUint32: return uint8_t(fmt::Dtype::kUint32);
    case ncclInt64: return uint8_t(fmt::Dtype::kInt64);
    case ncclUint64: return uint8_t(fmt::Dtype::kUint64);
    case ncclFloat16: return uint8_t(fmt::Dtype::kFloat16);
    case ncclFloat32: return uint8_t(fmt::Dtype::kFloat32);
    case ncclFloat64: return uint8_t(fmt::Dtype::kFloat64);
    case ncclBfloat16: return uint8_t(fmt::Dtype::kBfloat16);
    case ncclFloat8e4m3: return uint8_t(fmt::Dtype::kFloat8e4m3);
    case ncclFloat8e5m2: return uint8_t(fmt::Dtype::kFloat8e5m2);
    default: return uint8_t(fmt::Dtype::kOther);
  }
}

uint8_t NcclRedop(int op) {
  switch (op) {
    case ncclSum: return uint8_t(fmt::Redop::kSum);
    case ncclProd: return uint8_t(fmt::Redop::kProd);
    case ncclMax: return uint8_t(fmt::Redop::kMax);
    case ncclMin: return uint8_t(fmt::Redop::kMin);
    case ncclAvg: return uint8_t(fmt::Redop::kAvg);
    default: return uint8_t(fmt::Redop::kOther);  // ncclRedOpCreatePreMulSum's
  }
}

// --- the hooks of gpu.spec ------------------------------------------------------------

void After_ncclCommInitRank(fmt::Record& r, ncclResult_t ret, ncclComm_t* comm, int nranks, ncclUniqueId commId,
                            int rank) {
  if (!NcclAccepted(ret) || !comm) return;
  r.comm = Register(*comm, IdOf(commId), 0, r.call, rank, nranks, -1, -1, 0, nullptr);
}

void After_ncclCommInitRankConfig(fmt::Record& r, ncclResult_t ret, ncclComm_t* comm, int nranks,
                                  ncclUniqueId commId, int rank, ncclConfig_t* config) {
  if (!NcclAccepted(ret) || !comm) return;
  r.comm = Register(*comm, IdOf(commId), 0, r.call, rank, nranks, -1, -1, 0, ConfigName(config));
}

void After_ncclCommInitRankScalable(fmt::Record& r, ncclResult_t ret, ncclComm_t* newcomm, int nranks, int myrank,
                                    int nId, ncclUniqueId* commIds, ncclConfig_t* config) {
  if (!NcclAccepted(ret) || !newcomm || nId < 1 || !commIds) return;
  r.comm = Register(*newcomm, IdOf(commIds[0]), 0, r.call, myrank, nranks, -1, -1, 0, ConfigName(config));
}

void After_ncclCommInitAll(fmt::Record& r, ncclResult_t ret, ncclComm_t* comm, int ndev, const int*) {
  if (!NcclAccepted(ret) || !comm) return;
  // One process drives every device: its communicators exist nowhere else.
  uint32_t k = __atomic_add_fetch(&g_initall_counter, 1, __ATOMIC_RELAXED);
  uint64_t base = Combine(Combine(HashString("nccl-initall"), uint64_t(getpid())), k);
  for (int i = 0; i < ndev; ++i) {
    std::string label = "initall" + std::to_string(k) + ".dev" + std::to_string(i);
    uint16_t index = Register(comm[i], Combine(base, uint64_t(i)), 0, r.call, i, ndev, -1, -1, 0, label.c_str());
    if (i == 0) r.comm = index;
  }
}

void After_ncclCommSplit(fmt::Record& r, ncclResult_t ret, ncclComm_t, int color, int key, ncclComm_t* newcomm,
                         ncclConfig_t* config) {
  if (!NcclAccepted(ret)) return;
  uint32_t counter = NextChildCounter(r.comm);  // every member counts, NOCOLOR ones too
  if (!newcomm || !*newcomm) return;
  uint64_t parent = ParentId(r.comm);
  uint64_t id = Combine(Combine(Combine(parent, HashString("split")), uint64_t(uint32_t(color))), counter);
  Register(*newcomm, id, parent, r.call, -1, 0, color, key, counter, ConfigName(config));
}

void After_ncclCommShrink(fmt::Record& r, ncclResult_t ret, ncclComm_t, int* excludeRanksList, int excludeRanksCount,
                          ncclComm_t* newcomm, ncclConfig_t* config, int) {
  if (!NcclAccepted(ret)) return;
  uint32_t counter = NextChildCounter(r.comm);
  if (!newcomm || !*newcomm) return;
  uint64_t parent = ParentId(r.comm);
  uint64_t id = Combine(Combine(parent, HashString("shrink")), counter);
  for (int i = 0; excludeRanksList && i < excludeRanksCount; ++i) id = Combine(id, uint64_t(uint32_t(excludeRanksList[i])));
  Register(*newcomm, id, parent, r.call, -1, 0, -1, -1, counter, ConfigName(config));
}

void After_ncclCommFinalize(fmt::Record&, ncclResult_t, ncclComm_t) {}

void After_ncclCommDestroy(fmt::Record& r, ncclResult_t ret, ncclComm_t comm) {
  if (ret != ncclSuccess || r.comm == fmt::kNoComm) return;
  MarkCommFreed(r.comm);
  pthread_mutex_lock(&g_lock);
  g_table.Unmap(reinterpret_cast<uintptr_t>(comm));  // the handle may come back for a new comm
  pthread_mutex_unlock(&g_lock);
}

void After_ncclCommAbort(fmt::Record& r, ncclResult_t ret, ncclComm_t comm) { After_ncclCommDestroy(r, ret, comm); }

bool After_ncclCommGetAsyncError(fmt::Record& r, ncclResult_t ret, ncclComm_t, ncclResult_t* asyncError) {
  // Polled in a loop by framework watchdogs: recorded once per communicator,
  // when it first reports an error.
  if (ret != ncclSuccess || !asyncError || *asyncError == ncclSuccess || *asyncError == ncclInProgress) return false;
  if (r.comm == fmt::kNoComm || r.comm >= fmt::kMaxComms || __atomic_exchange_n(&g_async_reported[r.comm], 1, __ATOMIC_RELAXED)) {
    return false;
  }
  r.result = int32_t(*asyncError);
  r.flags |= fmt::kRecError;
  return true;
}

}  // namespace hangtrace::gpu
