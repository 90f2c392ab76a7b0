// FAKE libnccl.so.2 for tests only: NCCL's API with the ABI of the real
// nccl.h. Collectives run on the fake device's streams (cuLaunchHostFunc of
// the fake libcuda.so.1) and meet in a shared-memory segment per
// communicator, so separate processes really wait for each other: a rank
// that never calls a collective leaves the others' streams blocked in it,
// and ranks that call different collectives at the same step block forever,
// as NCCL does. Data moves for small buffers (allreduce, reduce,
// broadcast, allgather, send/recv); the rest only synchronizes.
#include <cuda.h>
#include <fcntl.h>
#include <nccl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr size_t kMaxBytes = 1 << 20;  // data moved per rank per operation (sparse: only what is used)
constexpr int kMaxRanks = 64;

struct Slot {
  std::atomic<uint64_t> arrived;
  std::atomic<uint64_t> left;
  int32_t op, dtype, redop, root;
  uint64_t count;
  char data[kMaxBytes];
};
struct Mailbox {
  std::atomic<uint64_t> sent, received;
  uint64_t bytes;
  char data[kMaxBytes];
};
struct Segment {
  int32_t nranks;
  Slot slots[kMaxRanks];
  Mailbox boxes[];  // nranks * nranks when nranks <= 8, else none
};

}  // namespace

struct ncclComm {
  Segment* seg;
  size_t seg_bytes;
  std::string path;
  int rank, nranks;
  uint64_t seq;
  uint64_t id;  // hash of the unique id (for split)
  CUstream last_stream;
};

namespace {

void Wait(const std::atomic<uint64_t>& v, uint64_t want) {
  while (v.load(std::memory_order_acquire) < want) usleep(50);
}

uint64_t Hash(const void* p, size_t n, uint64_t h = 1469598103934665603ull) {
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<const uint8_t*>(p)[i]) * 1099511628211ull;
  return h;
}

size_t Size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: case ncclFloat8e4m3: case ncclFloat8e5m2: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    default: return 8;
  }
}

ncclComm* Open(uint64_t id, int nranks, int rank) {
  if (nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks) return nullptr;
  char path[128];
  snprintf(path, sizeof(path), "/dev/shm/hangtrace-test-fakenccl-%016llx-%d", static_cast<unsigned long long>(id),
           nranks);
  size_t boxes = nranks <= 8 ? size_t(nranks) * nranks : 0;
  size_t bytes = sizeof(Segment) + boxes * sizeof(Mailbox);
  int fd = open(path, O_RDWR | O_CREAT, 0600);
  if (fd < 0 || ftruncate(fd, off_t(bytes)) != 0) return nullptr;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return nullptr;
  auto* c = new ncclComm{static_cast<Segment*>(p), bytes, path, rank, nranks, 0, id, nullptr};
  c->seg->nranks = nranks;
  return c;
}

// One collective step, run where it is called (a stream's worker, or the
// host for Split): publish, wait for all, check they agree, combine, leave.
struct Op {
  ncclComm* comm;
  uint64_t seq;
  int op;  // 1 allreduce 2 bcast 3 reduce 4 allgather 5 reducescatter 6 alltoall 7 gather 8 scatter 9 split
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t dtype;
  ncclRedOp_t redop;
  int root;
};

template <typename T>
void Reduce(T* out, const Segment* seg, int n, size_t count, ncclRedOp_t op) {
  for (size_t i = 0; i < count; ++i) {
    T v = reinterpret_cast<const T*>(seg->slots[0].data)[i];
    for (int r = 1; r < n; ++r) {
      T x = reinterpret_cast<const T*>(seg->slots[r].data)[i];
      v = op == ncclMax ? std::max(v, x) : op == ncclMin ? std::min(v, x) : op == ncclProd ? v * x : v + x;
    }
    out[i] = op == ncclAvg ? v / T(n) : v;
  }
}

void ReduceAny(void* out, const Segment* seg, int n, size_t count, ncclDataType_t t, ncclRedOp_t op) {
  switch (t) {
    case ncclFloat32: Reduce(static_cast<float*>(out), seg, n, count, op); break;
    case ncclFloat64: Reduce(static_cast<double*>(out), seg, n, count, op); break;
    case ncclInt32: Reduce(static_cast<int32_t*>(out), seg, n, count, op); break;
    case ncclInt64: Reduce(static_cast<int64_t*>(out), seg, n, count, op); break;
    default: break;
  }
}

void Run(const Op& o) {
  Segment* seg = o.comm->seg;
  const int n = o.comm->nranks, me = o.comm->rank;
  Slot& mine = seg->slots[me];
  size_t bytes = o.count * Size(o.dtype);
  mine.op = o.op;
  mine.dtype = o.dtype;
  mine.redop = o.redop;
  mine.root = o.root;
  mine.count = o.count;
  bool data = bytes <= kMaxBytes && o.send;
  if (data) memcpy(mine.data, o.send, bytes);
  mine.arrived.store(o.seq, std::memory_order_release);
  for (int r = 0; r < n; ++r) Wait(seg->slots[r].arrived, o.seq);
  for (int r = 0; r < n; ++r) {
    const Slot& s = seg->slots[r];
    if (s.op != o.op || s.count != o.count || s.dtype != o.dtype || s.root != o.root) {
      for (;;) pause();  // mismatched collectives: NCCL's kernels never meet
    }
  }
  if (data && o.recv) {
    switch (o.op) {
      case 1: ReduceAny(o.recv, seg, n, o.count, o.dtype, o.redop); break;
      case 3: if (me == o.root) ReduceAny(o.recv, seg, n, o.count, o.dtype, o.redop); break;
      case 2: memcpy(o.recv, seg->slots[o.root].data, bytes); break;
      case 4: case 9:
        for (int r = 0; r < n; ++r) memcpy(static_cast<char*>(o.recv) + r * bytes, seg->slots[r].data, bytes);
        break;
      default: break;
    }
  }
  mine.left.store(o.seq, std::memory_order_release);
  for (int r = 0; r < n; ++r) Wait(seg->slots[r].left, o.seq);
}

void RunHost(void* p) {
  auto* o = static_cast<Op*>(p);
  Run(*o);
  delete o;
}

ncclResult_t Enqueue(ncclComm_t comm, cudaStream_t stream, Op o) {
  if (!comm) return ncclInvalidArgument;
  o.comm = comm;
  o.seq = ++comm->seq;
  comm->last_stream = reinterpret_cast<CUstream>(stream);
  return cuLaunchHostFunc(reinterpret_cast<CUstream>(stream), RunHost, new Op(o)) == CUDA_SUCCESS ? ncclSuccess
                                                                                                    : ncclUnhandledCudaError;
}

struct P2p {
  ncclComm* comm;
  bool send;
  int peer;
  const void* src;
  void* dst;
  size_t bytes;
};

void RunP2p(void* p) {
  auto* o = static_cast<P2p*>(p);
  Segment* seg = o->comm->seg;
  const int n = o->comm->nranks;
  if (n > 8) {
    delete o;
    return;
  }
  if (o->send) {
    Mailbox& b = seg->boxes[o->comm->rank * n + o->peer];
    uint64_t k = b.sent.load();
    Wait(b.received, k);  // the previous message was taken
    b.bytes = std::min(o->bytes, kMaxBytes);
    memcpy(b.data, o->src, b.bytes);
    b.sent.store(k + 1, std::memory_order_release);
  } else {
    Mailbox& b = seg->boxes[o->peer * n + o->comm->rank];
    uint64_t k = b.received.load();
    Wait(b.sent, k + 1);
    memcpy(o->dst, b.data, std::min(o->bytes, b.bytes));
    b.received.store(k + 1, std::memory_order_release);
  }
  delete o;
}

}  // namespace

#define ALIAS(name) __attribute__((alias(#name)))

FAKE_EXPORT ncclResult_t ncclGetVersion(int* v) {
  *v = NCCL_VERSION_CODE;
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  memset(id, 0, sizeof(*id));
  snprintf(id->internal, sizeof(id->internal), "fakenccl %d %ld", getpid(), static_cast<long>(random()));
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  *comm = Open(Hash(id.internal, sizeof(id.internal)), nranks, rank);
  return *comm ? ncclSuccess : ncclInvalidArgument;
}
FAKE_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                                ncclConfig_t*) {
  return ncclCommInitRank(comm, nranks, id, rank);
}
FAKE_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int nId, ncclUniqueId* ids,
                                                  ncclConfig_t*) {
  if (nId < 1) return ncclInvalidArgument;
  return ncclCommInitRank(comm, nranks, ids[0], rank);
}
FAKE_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int*) {
  uint64_t id = Hash("initall", 7, uint64_t(getpid()));
  for (int i = 0; i < ndev; ++i) comms[i] = Open(id, ndev, i);
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t*) {
  if (!comm) return ncclInvalidArgument;
  // Host-side allgather of (color, key) over the parent, then the members
  // of each colour ordered by (key, parent rank).
  int32_t mine[2] = {color, key};
  std::vector<int32_t> all(size_t(comm->nranks) * 2);
  Op o{comm, ++comm->seq, 9, mine, all.data(), 2, ncclInt32, ncclSum, 0};
  Run(o);
  *newcomm = nullptr;
  if (color == NCCL_SPLIT_NOCOLOR) return ncclSuccess;
  std::vector<std::pair<int32_t, int>> members;
  for (int r = 0; r < comm->nranks; ++r) {
    if (all[size_t(r) * 2] == color) members.push_back({all[size_t(r) * 2 + 1], r});
  }
  std::sort(members.begin(), members.end());
  int rank = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i].second == comm->rank) rank = int(i);
  }
  uint64_t id = Hash(&color, sizeof(color), Hash(&o.seq, sizeof(o.seq), comm->id));
  *newcomm = Open(id, int(members.size()), rank);
  return *newcomm ? ncclSuccess : ncclInternalError;
}
FAKE_EXPORT ncclResult_t ncclCommShrink(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int) {
  fprintf(stderr, "fake libnccl: ncclCommShrink is not emulated\n");
  return ncclInvalidUsage;
}
FAKE_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t) { return ncclSuccess; }
FAKE_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  if (comm->rank == 0) unlink(comm->path.c_str());
  munmap(comm->seg, comm->seg_bytes);
  delete comm;
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }
FAKE_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* e) {
  *e = ncclSuccess;
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int* n) {
  *n = comm->nranks;
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* r) {
  *r = comm->rank;
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t, int* d) {
  *d = 0;
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclAllReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                                       ncclComm_t c, cudaStream_t st) {
  return Enqueue(c, st, Op{nullptr, 0, 1, s, r, n, t, op, 0});
}
FAKE_EXPORT ncclResult_t ncclBroadcast(const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t c,
                                       cudaStream_t st) {
  return Enqueue(c, st, Op{nullptr, 0, 2, s, r, n, t, ncclSum, root});
}
FAKE_EXPORT ncclResult_t ncclBcast(void* b, size_t n, ncclDataType_t t, int root, ncclComm_t c, cudaStream_t st) {
  return ncclBroadcast(b, b, n, t, root, c, st);
}
FAKE_EXPORT ncclResult_t ncclReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op, int root,
                                    ncclComm_t c, cudaStream_t st) {
  return Enqueue(c, st, Op{nullptr, 0, 3, s, r, n, t, op, root});
}
FAKE_EXPORT ncclResult_t ncclAllGather(const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t c,
                                       cudaStream_t st) {
  return Enqueue(c, st, Op{nullptr, 0, 4, s, r, n, t, ncclSum, 0});
}
FAKE_EXPORT ncclResult_t ncclReduceScatter(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                                           ncclComm_t c, cudaStream_t st) {
  return Enqueue(c, st, Op{nullptr, 0, 5, s, r, n, t, op, 0});
}
FAKE_EXPORT ncclResult_t ncclAlltoAll(const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t c,
                                      cudaStream_t st) {
  return Enqueue(c, st, Op{nullptr, 0, 6, s, r, n, t, ncclSum, 0});
}
FAKE_EXPORT ncclResult_t ncclGather(const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t c,
                                    cudaStream_t st) {
  return Enqueue(c, st, Op{nullptr, 0, 7, s, r, n, t, ncclSum, root});
}
FAKE_EXPORT ncclResult_t ncclScatter(const void* s, void* r, size_t n, ncclDataType_t t, int root, ncclComm_t c,
                                     cudaStream_t st) {
  return Enqueue(c, st, Op{nullptr, 0, 8, s, r, n, t, ncclSum, root});
}
FAKE_EXPORT ncclResult_t ncclSend(const void* s, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
  if (!c) return ncclInvalidArgument;
  return cuLaunchHostFunc(reinterpret_cast<CUstream>(st), RunP2p, new P2p{c, true, peer, s, nullptr, n * Size(t)}) ==
                 CUDA_SUCCESS
             ? ncclSuccess
             : ncclUnhandledCudaError;
}
FAKE_EXPORT ncclResult_t ncclRecv(void* r, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t st) {
  if (!c) return ncclInvalidArgument;
  return cuLaunchHostFunc(reinterpret_cast<CUstream>(st), RunP2p, new P2p{c, false, peer, nullptr, r, n * Size(t)}) ==
                 CUDA_SUCCESS
             ? ncclSuccess
             : ncclUnhandledCudaError;
}
FAKE_EXPORT ncclResult_t ncclGroupStart() { return ncclSuccess; }
FAKE_EXPORT ncclResult_t ncclGroupEnd() { return ncclSuccess; }

// NCCL exports every call a second time with a 'p' (for profilers).
FAKE_EXPORT ncclResult_t pncclAllReduce(const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
                                        cudaStream_t) ALIAS(ncclAllReduce);
FAKE_EXPORT ncclResult_t pncclBroadcast(const void*, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t)
    ALIAS(ncclBroadcast);
FAKE_EXPORT ncclResult_t pncclCommInitRank(ncclComm_t*, int, ncclUniqueId, int) ALIAS(ncclCommInitRank);
FAKE_EXPORT ncclResult_t pncclCommDestroy(ncclComm_t) ALIAS(ncclCommDestroy);
FAKE_EXPORT ncclResult_t pncclGroupStart() ALIAS(ncclGroupStart);
FAKE_EXPORT ncclResult_t pncclGroupEnd() ALIAS(ncclGroupEnd);
