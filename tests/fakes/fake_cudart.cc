// FAKE libcudart.so for tests only: the runtime calls hangtrace wraps, with
// the ABI of the real cuda_runtime_api.h. Like the real runtime it loads
// libcuda.so.1 with dlopen and reaches every driver call through
// cuGetProcAddress, so launches made here are the ones hangtrace can only
// see by wrapping dlsym and cuGetProcAddress.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#undef cuGetProcAddress

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct Driver {
  decltype(&cuLaunchKernel) launch, launch_ptsz;
  decltype(&cuStreamSynchronize) sync, sync_ptsz;
  CUresult (*ctx_sync)(CUcontext);  // the CUDA 13 ABI (cuCtxSynchronize_v2)
  decltype(&cuStreamCreate) stream_create;
  decltype(&cuEventSynchronize) event_sync;
  decltype(&cuLaunchHostFunc) host_func;
  CUfunction (*make_function)(const char*, int);
};

const Driver& D() {
  static Driver d = [] {
    Driver d{};
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      fprintf(stderr, "fake libcudart: cannot load libcuda.so.1: %s\n", dlerror());
      abort();
    }
    auto get_proc = reinterpret_cast<decltype(&cuGetProcAddress_v2)>(dlsym(h, "cuGetProcAddress_v2"));
    auto get = [&](const char* name, bool ptsz) {
      void* p = nullptr;
      CUdriverProcAddressQueryResult st;
      get_proc(name, &p, CUDA_VERSION, ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0, &st);
      return p;
    };
    d.launch = reinterpret_cast<decltype(d.launch)>(get("cuLaunchKernel", false));
    d.launch_ptsz = reinterpret_cast<decltype(d.launch)>(get("cuLaunchKernel", true));
    d.sync = reinterpret_cast<decltype(d.sync)>(get("cuStreamSynchronize", false));
    d.sync_ptsz = reinterpret_cast<decltype(d.sync)>(get("cuStreamSynchronize", true));
    d.ctx_sync = reinterpret_cast<decltype(d.ctx_sync)>(get("cuCtxSynchronize", false));
    d.stream_create = reinterpret_cast<decltype(d.stream_create)>(get("cuStreamCreate", false));
    d.event_sync = reinterpret_cast<decltype(d.event_sync)>(get("cuEventSynchronize", false));
    d.host_func = reinterpret_cast<decltype(d.host_func)>(get("cuLaunchHostFunc", false));
    d.make_function = reinterpret_cast<decltype(d.make_function)>(dlsym(h, "fake_cuFunction"));
    return d;
  }();
  return d;
}

std::mutex g_mu;
std::unordered_map<const void*, CUfunction> g_kernels;

CUfunction KernelOf(const void* func) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_kernels.find(func);
  return it == g_kernels.end() ? nullptr : it->second;
}

cudaError_t Launch(const void* func, dim3 g, dim3 b, cudaStream_t s, bool ptsz) {
  CUfunction f = KernelOf(func);
  if (!f) return cudaErrorInvalidDeviceFunction;
  auto fn = ptsz ? D().launch_ptsz : D().launch;
  return fn(f, g.x, g.y, g.z, b.x, b.y, b.z, 0, reinterpret_cast<CUstream>(s), nullptr, nullptr) == CUDA_SUCCESS
             ? cudaSuccess
             : cudaErrorLaunchFailure;
}

}  // namespace

// --- fake-only: a host stub's kernel (what __cudaRegisterFunction does) -----------
FAKE_EXPORT void fake_cudaRegisterKernel(const void* host_stub, const char* name, int ms) {
  CUfunction f = D().make_function(name, ms);
  std::lock_guard<std::mutex> lock(g_mu);
  g_kernels[host_stub] = f;
}

// --- what nvcc's host code calls: kernel registration and <<<...>>> ------------------
// Device code cannot run here: a registered kernel is a fake one that
// finishes at once (the data it should have written stays as it was).
FAKE_EXPORT void** __cudaRegisterFatBinary(void* fat) { return static_cast<void**>(fat); }
FAKE_EXPORT void __cudaRegisterFatBinaryEnd(void**) {}
FAKE_EXPORT void __cudaUnregisterFatBinary(void**) {}
FAKE_EXPORT void __cudaRegisterFunction(void**, const char* host_fun, char*, const char* device_name, int, uint3*,
                                        uint3*, dim3*, dim3*, int*) {
  fake_cudaRegisterKernel(host_fun, device_name, 0);
}
namespace {
struct CallConfig {
  dim3 grid, block;
  size_t shared;
  void* stream;
};
thread_local CallConfig t_config;
}  // namespace
FAKE_EXPORT unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared, struct CUstream_st* stream) {
  t_config = CallConfig{grid, block, shared, stream};
  return 0;
}
FAKE_EXPORT cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* shared, void* stream) {
  *grid = t_config.grid;
  *block = t_config.block;
  *shared = t_config.shared;
  *static_cast<void**>(stream) = t_config.stream;
  return cudaSuccess;
}
FAKE_EXPORT cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* host_fun) {
  *kernel = reinterpret_cast<cudaKernel_t>(KernelOf(host_fun));
  return *kernel ? cudaSuccess : cudaErrorInvalidDeviceFunction;
}
FAKE_EXPORT cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 g, dim3 b, void**, size_t, cudaStream_t s) {
  return D().launch(reinterpret_cast<CUfunction>(k), g.x, g.y, g.z, b.x, b.y, b.z, 0, reinterpret_cast<CUstream>(s),
                    nullptr, nullptr) == CUDA_SUCCESS ? cudaSuccess : cudaErrorLaunchFailure;
}
FAKE_EXPORT cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 g, dim3 b, void**, size_t, cudaStream_t s) {
  return D().launch_ptsz(reinterpret_cast<CUfunction>(k), g.x, g.y, g.z, b.x, b.y, b.z, 0,
                         reinterpret_cast<CUstream>(s), nullptr, nullptr) == CUDA_SUCCESS ? cudaSuccess
                                                                                          : cudaErrorLaunchFailure;
}

// --- the runtime API -----------------------------------------------------------------
FAKE_EXPORT cudaError_t cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
FAKE_EXPORT cudaError_t cudaSetDevice(int) { return cudaSuccess; }
FAKE_EXPORT cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
FAKE_EXPORT cudaError_t cudaMalloc(void** p, size_t n) {
  *p = calloc(1, n ? n : 1);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
FAKE_EXPORT cudaError_t cudaFree(void* p) {
  free(p);
  return cudaSuccess;
}
FAKE_EXPORT cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, enum cudaMemcpyKind) {
  D().ctx_sync(nullptr);
  memcpy(dst, src, n);
  return cudaSuccess;
}
namespace {
struct Copy {
  void* dst;
  const void* src;
  size_t n;
};
void DoCopy(void* p) {
  auto* c = static_cast<Copy*>(p);
  memcpy(c->dst, c->src, c->n);
  delete c;
}
}  // namespace
FAKE_EXPORT cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, enum cudaMemcpyKind, cudaStream_t s) {
  return D().host_func(reinterpret_cast<CUstream>(s), DoCopy, new Copy{dst, src, n}) == CUDA_SUCCESS ? cudaSuccess
                                                                                                       : cudaErrorUnknown;
}
FAKE_EXPORT cudaError_t cudaMemset(void* p, int v, size_t n) {
  D().ctx_sync(nullptr);
  memset(p, v, n);
  return cudaSuccess;
}
FAKE_EXPORT cudaError_t cudaGetLastError(void) { return cudaSuccess; }
FAKE_EXPORT cudaError_t cudaPeekAtLastError(void) { return cudaSuccess; }
FAKE_EXPORT const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "fake error"; }
FAKE_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
FAKE_EXPORT cudaError_t cudaStreamCreate(cudaStream_t* s) {
  return D().stream_create(reinterpret_cast<CUstream*>(s), 0) == CUDA_SUCCESS ? cudaSuccess : cudaErrorUnknown;
}
FAKE_EXPORT cudaError_t cudaLaunchKernel(const void* func, dim3 g, dim3 b, void**, size_t, cudaStream_t s) {
  return Launch(func, g, b, s, false);
}
FAKE_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 g, dim3 b, void**, size_t, cudaStream_t s) {
  return Launch(func, g, b, s, true);
}
FAKE_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* c, const void* func, void**) {
  return Launch(func, c->gridDim, c->blockDim, c->stream, false);
}
FAKE_EXPORT cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* c, const void* func, void**) {
  return Launch(func, c->gridDim, c->blockDim, c->stream, true);
}
FAKE_EXPORT cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 g, dim3 b, void**, size_t, cudaStream_t s) {
  return Launch(func, g, b, s, false);
}
FAKE_EXPORT cudaError_t cudaLaunchCooperativeKernel_ptsz(const void* func, dim3 g, dim3 b, void**, size_t,
                                                         cudaStream_t s) {
  return Launch(func, g, b, s, true);
}
FAKE_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  return D().sync(reinterpret_cast<CUstream>(s)) == CUDA_SUCCESS ? cudaSuccess : cudaErrorUnknown;
}
FAKE_EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s) {
  return D().sync_ptsz(reinterpret_cast<CUstream>(s)) == CUDA_SUCCESS ? cudaSuccess : cudaErrorUnknown;
}
FAKE_EXPORT cudaError_t cudaDeviceSynchronize(void) {
  return D().ctx_sync(nullptr) == CUDA_SUCCESS ? cudaSuccess : cudaErrorUnknown;
}
FAKE_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  return D().event_sync(reinterpret_cast<CUevent>(e)) == CUDA_SUCCESS ? cudaSuccess : cudaErrorUnknown;
}
