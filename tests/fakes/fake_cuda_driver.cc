// FAKE libcuda.so.1 for tests only: the CUDA driver API calls hangtrace
// wraps or uses, with the ABI of the real cuda.h, on the emulated device of
// fake_device.h. Not a GPU: kernels are sleeps.
#include <cuda.h>

#include <unistd.h>

#include <cstring>
#include <string>

#include "fake_device.h"

#undef cuGetProcAddress

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
int g_context_storage;
CUcontext Context() { return reinterpret_cast<CUcontext>(&g_context_storage); }
fake::Stream* S(CUstream s, bool ptsz) { return fake::ResolveStream(reinterpret_cast<uintptr_t>(s), ptsz); }
const fake::Kernel* K(CUfunction f) { return reinterpret_cast<const fake::Kernel*>(f); }

CUresult Launch(CUfunction f, CUstream s, bool ptsz) {
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  fake::Launch(K(f), S(s, ptsz));
  return CUDA_SUCCESS;
}
}  // namespace

// --- fake-only: what a test uses to make kernels and see where they ran ---------
FAKE_EXPORT CUfunction fake_cuFunction(const char* name, int ms) {
  auto* k = new fake::Kernel{name, ms};
  return reinterpret_cast<CUfunction>(k);
}
FAKE_EXPORT unsigned long long fake_cuLastLaunchStream() { return fake::LastLaunchStream(); }
FAKE_EXPORT unsigned long long fake_cuLaunches() { return fake::Launches(); }
FAKE_EXPORT unsigned long long fake_cuStreamId(CUstream s, int ptsz) { return fake::StreamId(S(s, ptsz != 0)); }

// --- the driver API ------------------------------------------------------------------
FAKE_EXPORT CUresult cuInit(unsigned int) { return CUDA_SUCCESS; }
FAKE_EXPORT CUresult cuDriverGetVersion(int* v) {
  *v = CUDA_VERSION;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxGetCurrent(CUcontext* ctx) {
  *ctx = Context();
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxSynchronize(void) {
  fake::DrainAll();
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxSynchronize_v2(CUcontext) { return cuCtxSynchronize(); }
FAKE_EXPORT CUresult cuStreamCreate(CUstream* s, unsigned int) {
  *s = reinterpret_cast<CUstream>(fake::NewStream());
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamQuery(CUstream s) { return fake::Idle(S(s, false)) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY; }
FAKE_EXPORT CUresult cuStreamQuery_ptsz(CUstream s) { return fake::Idle(S(s, true)) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY; }
FAKE_EXPORT CUresult cuStreamSynchronize(CUstream s) {
  fake::Drain(S(s, false));
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s) {
  fake::Drain(S(s, true));
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamIsCapturing(CUstream, CUstreamCaptureStatus* st) {
  *st = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuEventCreate(CUevent* e, unsigned int) {
  *e = reinterpret_cast<CUevent>(new fake::Event());
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
  fake::RecordEvent(reinterpret_cast<fake::Event*>(e), S(s, false));
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuEventQuery(CUevent e) {
  return reinterpret_cast<fake::Event*>(e)->state.load() == 0 ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
FAKE_EXPORT CUresult cuEventSynchronize(CUevent e) {
  while (cuEventQuery(e) == CUDA_ERROR_NOT_READY) usleep(200);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void* data) {
  fake::Enqueue(S(s, false), [fn, data] { fn(data); });
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuFuncGetName(const char** name, CUfunction f) {
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  *name = K(f)->name.c_str();
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuKernelGetName(const char** name, CUkernel k) {
  return cuFuncGetName(name, reinterpret_cast<CUfunction>(k));
}
FAKE_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    CUstream s, void**, void**) {
  return Launch(f, s, false);
}
FAKE_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                         unsigned, CUstream s, void**, void**) {
  return Launch(f, s, true);
}
FAKE_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void**, void**) {
  return Launch(f, c ? c->hStream : nullptr, false);
}
FAKE_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* c, CUfunction f, void**, void**) {
  return Launch(f, c ? c->hStream : nullptr, true);
}
FAKE_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned,
                                               unsigned, unsigned, CUstream s, void**) {
  return Launch(f, s, false);
}
FAKE_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned,
                                                    unsigned, unsigned, CUstream s, void**) {
  return Launch(f, s, true);
}

// cuGetProcAddress as the driver does it: the symbol's base name, the
// per-thread variant when asked for, the version's ABI.
struct Entry {
  const char* name;
  void* legacy;
  void* per_thread;
};
#define E(n) {#n, reinterpret_cast<void*>(&n), reinterpret_cast<void*>(&n)}
#define EP(n) {#n, reinterpret_cast<void*>(&n), reinterpret_cast<void*>(&n##_ptsz)}
FAKE_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult* status);
FAKE_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags);
static const Entry kEntries[] = {
    E(cuInit), E(cuDriverGetVersion), E(cuCtxGetCurrent), E(cuStreamCreate), EP(cuStreamQuery),
    EP(cuStreamSynchronize), E(cuStreamIsCapturing), E(cuEventCreate), E(cuEventRecord), E(cuEventQuery),
    E(cuEventSynchronize), E(cuLaunchHostFunc), E(cuFuncGetName), E(cuKernelGetName), EP(cuLaunchKernel), EP(cuLaunchKernelEx),
    EP(cuLaunchCooperativeKernel),
};

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                         CUdriverProcAddressQueryResult* status) {
  *pfn = nullptr;
  if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  std::string s = symbol;
  if (s == "cuGetProcAddress") {
    *pfn = version >= 12000 ? reinterpret_cast<void*>(&cuGetProcAddress_v2) : reinterpret_cast<void*>(&cuGetProcAddress);
  } else if (s == "cuCtxSynchronize") {
    *pfn = version >= 13000 ? reinterpret_cast<void*>(&cuCtxSynchronize_v2) : reinterpret_cast<void*>(&cuCtxSynchronize);
  } else {
    for (const Entry& e : kEntries) {
      if (s == e.name) *pfn = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ? e.per_thread : e.legacy;
    }
  }
  if (!*pfn) return CUDA_ERROR_NOT_FOUND;
  if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, nullptr);
}
