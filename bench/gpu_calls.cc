// Host-side cost of traced NCCL calls and kernel launches, on the FAKE
// libraries of tests/fakes (no GPU here): bench_gpu.sh runs it untraced and
// under hangtrace with each device-events setting, interleaved.
//   gpu_calls N   prints "nccl_ns <x>" and "launch_ns <y>" per call.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>

extern "C" void fake_cudaRegisterKernel(const void* host_stub, const char* name, int ms);
extern "C" __attribute__((noinline, visibility("default"))) void bench_kernel() { asm volatile(""); }

static double NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 20000;
  fake_cudaRegisterKernel((const void*)&bench_kernel, "bench_kernel", 0);
  ncclUniqueId id;
  ncclComm_t comm;
  ncclGetUniqueId(&id);
  if (ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) return 1;
  cudaStream_t s;
  cudaStreamCreate(&s);
  float x = 1;
  // Batches of 256, then a sync: the host cost of issuing, as a training
  // step issues many before it waits.
  double spent = 0;
  for (int i = 0; i < n; i += 256) {
    double t0 = NowNs();
    for (int k = 0; k < 256; ++k) ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comm, s);
    spent += NowNs() - t0;
    cudaStreamSynchronize(s);
  }
  printf("nccl_ns %.1f\n", spent / double((n + 255) / 256 * 256));
  spent = 0;
  for (int i = 0; i < n; i += 256) {
    double t0 = NowNs();
    for (int k = 0; k < 256; ++k) cudaLaunchKernel((const void*)&bench_kernel, dim3(1), dim3(32), nullptr, 0, s);
    spent += NowNs() - t0;
    cudaStreamSynchronize(s);
  }
  printf("launch_ns %.1f\n", spent / double((n + 255) / 256 * 256));
  ncclCommDestroy(comm);
  return 0;
}
