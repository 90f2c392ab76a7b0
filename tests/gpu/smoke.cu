// The real-GPU smoke test of scripts/gpu-smoke.sh: one rank, one NCCL
// communicator, a few kernels and collectives on a stream, then a sync. Run
// under hangtrace, its trace shows each launch and collective with the time
// the device completed it.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>

#define CHECK_CUDA(x)                                                                       \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));  \
      exit(2);                                                                              \
    }                                                                                       \
  } while (0)
#define CHECK_NCCL(x)                                                                       \
  do {                                                                                      \
    ncclResult_t r_ = (x);                                                                  \
    if (r_ != ncclSuccess) {                                                                \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, ncclGetErrorString(r_));  \
      exit(2);                                                                              \
    }                                                                                       \
  } while (0)

__global__ void scale(float* x, int n, float a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}

__global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

int main() {
  int devices = 0;
  CHECK_CUDA(cudaGetDeviceCount(&devices));
  CHECK_CUDA(cudaSetDevice(0));
  const int n = 1 << 20;
  float* x;
  CHECK_CUDA(cudaMalloc(&x, n * sizeof(float)));
  CHECK_CUDA(cudaMemset(x, 0, n * sizeof(float)));
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreate(&s));
  ncclUniqueId id;
  ncclComm_t comm;
  CHECK_NCCL(ncclGetUniqueId(&id));
  CHECK_NCCL(ncclCommInitRank(&comm, 1, id, 0));
  for (int step = 0; step < 3; ++step) {
    scale<<<(n + 255) / 256, 256, 0, s>>>(x, n, 0.5f);
    spin<<<1, 1, 0, s>>>(50 * 1000 * 1000);  // ~25 ms: completion visibly later than the launch
    CHECK_NCCL(ncclAllReduce(x, x, n, ncclFloat, ncclSum, comm, s));
    CHECK_NCCL(ncclBroadcast(x, x, n, ncclFloat, 0, comm, s));
  }
  CHECK_CUDA(cudaStreamSynchronize(s));
  CHECK_NCCL(ncclCommDestroy(comm));
  printf("gpu smoke: %d device(s), 3 steps done\n", devices);
  return 0;
}
