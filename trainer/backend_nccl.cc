// The NCCL backend: the same calls as backend_mpi.cc, over NCCL
// communicators on a GPU. The model's arithmetic stays on the host (as with
// MPI); each call stages its buffer through device memory, runs the NCCL
// operation on the backend's stream and waits for it, so the traffic, the
// order of operations and every hang are NCCL's own. MPI only starts the
// job and hands out the ncclUniqueIds.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "trainer/backend.h"

extern "C" cudaError_t TrainerToHalf(const float* in, void* out, size_t n, cudaStream_t s);
extern "C" cudaError_t TrainerFromHalf(const void* in, float* out, size_t n, cudaStream_t s);

namespace trainer {
namespace {

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    fprintf(stderr, "hangtrace-trainer: %s: %s\n", what, cudaGetErrorString(e));
    abort();
  }
}

void Check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) {
    fprintf(stderr, "hangtrace-trainer: %s: %s\n", what, ncclGetErrorString(r));
    abort();
  }
}

class NcclBackend : public Backend {
 public:
  NcclBackend(const Topology& t, int device) {
    Check(cudaSetDevice(device), "cudaSetDevice");
    Check(cudaStreamCreate(&stream_), "cudaStreamCreate");
    // The same groups and labels as the MPI backend: world, tpK, ppK, dpK.
    Make(Group::kWorld, MPI_COMM_WORLD, "world");
    Split(Group::kTp, t.P() + t.pp * t.D(), t.T(), "tp");
    Split(Group::kPp, t.T() + t.tp * t.D(), t.P(), "pp");
    Split(Group::kDp, t.T() + t.tp * t.P(), t.D(), "dp");
  }

  void AllreduceSum(float* data, size_t count, Group g) override {
    Run(data, count * sizeof(float), [&](void* d) {
      Check(ncclAllReduce(d, d, count, ncclFloat32, ncclSum, comms_[int(g)], stream_), "ncclAllReduce");
    });
  }
  void AllreduceMax(int* data, size_t count, Group g) override {
    Run(data, count * sizeof(int), [&](void* d) {
      Check(ncclAllReduce(d, d, count, ncclInt32, ncclMax, comms_[int(g)], stream_), "ncclAllReduce");
    });
  }
  void Bcast(float* data, size_t count, int root, Group g) override {
    Run(data, count * sizeof(float), [&](void* d) {
      Check(ncclBroadcast(d, d, count, ncclFloat32, root, comms_[int(g)], stream_), "ncclBroadcast");
    });
  }
  void Send(const float* data, size_t count, int peer, int, Group g, bool) override {
    // NCCL has no tags: the pipeline's sends and receives pair in order.
    // Every NCCL send waits for its receive, so `synchronous` is the rule.
    Run(const_cast<float*>(data), count * sizeof(float), [&](void* d) {
      Check(ncclSend(d, count, ncclFloat32, peer, comms_[int(g)], stream_), "ncclSend");
    }, /*copy_back=*/false);
  }
  void Recv(float* data, size_t count, int peer, int, Group g) override {
    Run(data, count * sizeof(float), [&](void* d) {
      Check(ncclRecv(d, count, ncclFloat32, peer, comms_[int(g)], stream_), "ncclRecv");
    });
  }
  void AllreduceSumAsHalf(float* data, size_t count, Group g) override {
    // The dtype fault: converted on the device, all-reduced as fp16.
    Run(data, count * sizeof(float), [&](void* d) {
      void* half = Scratch(count * 2);
      Check(TrainerToHalf(static_cast<float*>(d), half, count, stream_), "TrainerToHalf");
      Check(ncclAllReduce(half, half, count, ncclFloat16, ncclSum, comms_[int(g)], stream_), "ncclAllReduce");
      Check(TrainerFromHalf(half, static_cast<float*>(d), count, stream_), "TrainerFromHalf");
    });
  }
  std::string Name() const override { return "nccl"; }

 private:
  template <typename Op>
  void Run(void* host, size_t bytes, Op op, bool copy_back = true) {
    void* d = Buffer(bytes);
    Check(cudaMemcpyAsync(d, host, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync");
    op(d);
    if (copy_back) Check(cudaMemcpyAsync(host, d, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync");
    Check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
  }

  static void* Grow(void** p, size_t* have, size_t bytes) {
    if (*have < bytes) {
      if (*p) cudaFree(*p);
      Check(cudaMalloc(p, bytes), "cudaMalloc");
      *have = bytes;
    }
    return *p;
  }
  void* Buffer(size_t bytes) { return Grow(&buf_, &buf_bytes_, bytes); }
  void* Scratch(size_t bytes) { return Grow(&scratch_, &scratch_bytes_, bytes); }

  // One NCCL communicator over the members of `mpi`, named `name` (the
  // label hangtrace reports it by, from ncclConfig_t.commName).
  void Make(Group g, MPI_Comm mpi, const std::string& name) {
    int rank = 0, size = 0;
    MPI_Comm_rank(mpi, &rank);
    MPI_Comm_size(mpi, &size);
    ncclUniqueId id;
    if (rank == 0) Check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, mpi);
    names_[int(g)] = name;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.commName = names_[int(g)].c_str();
    Check(ncclCommInitRankConfig(&comms_[int(g)], size, id, rank, &config), "ncclCommInitRankConfig");
  }
  void Split(Group g, int color, int key, const char* prefix) {
    MPI_Comm mpi;
    MPI_Comm_split(MPI_COMM_WORLD, color, key, &mpi);
    Make(g, mpi, prefix + std::to_string(color));
    MPI_Comm_free(&mpi);
  }

  cudaStream_t stream_ = nullptr;
  ncclComm_t comms_[4] = {};
  std::string names_[4];
  void* buf_ = nullptr;
  size_t buf_bytes_ = 0;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
};

int LocalRank() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "LOCAL_RANK"}) {
    if (const char* s = getenv(v)) return atoi(s);
  }
  return 0;
}

}  // namespace

Backend* MakeNcclBackend(const Topology& topo, std::string* error) {
  int devices = 0;
  cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    *error = std::string("--backend nccl needs an NVIDIA GPU, and none is visible here (cudaGetDeviceCount: ") +
             (e != cudaSuccess ? cudaGetErrorString(e) : "0 devices") + "); use --backend mpi";
    return nullptr;
  }
  return new NcclBackend(topo, LocalRank() % devices);
}

}  // namespace trainer
