// The trainer's device kernels (nvcc), for the NCCL backend: the conversions
// of the dtype fault (a rank that all-reduces its buffer as fp16 where the
// others use fp32).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace {

__global__ void ToHalf(const float* in, __half* out, size_t n) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = __float2half(in[i]);
}

__global__ void FromHalf(const __half* in, float* out, size_t n) {
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = __half2float(in[i]);
}

unsigned Blocks(size_t n) { return unsigned((n + 255) / 256); }

}  // namespace

extern "C" cudaError_t TrainerToHalf(const float* in, void* out, size_t n, cudaStream_t s) {
  ToHalf<<<Blocks(n), 256, 0, s>>>(in, static_cast<__half*>(out), n);
  return cudaGetLastError();
}

extern "C" cudaError_t TrainerFromHalf(const void* in, float* out, size_t n, cudaStream_t s) {
  FromHalf<<<Blocks(n), 256, 0, s>>>(static_cast<const __half*>(in), out, n);
  return cudaGetLastError();
}
