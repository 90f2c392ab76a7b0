// CUDA's half of the GPU wrappers: the cuGetProcAddress wrappers, the
// driver calls device completion uses, and kernel names of CUfunctions.
#include <cuda.h>

#include <cstring>
#include <string>

#include "interpose/gpu_support.h"

// cuda.h renames cuGetProcAddress to its _v2; the old symbol is exported too.
#undef cuGetProcAddress

namespace hangtrace::gpu {
namespace {

template <typename F>
F Driver(const char* name) {
  return FindLoaded<F>(name, fmt::Api::kCuda);
}

struct CudaCalls {
  decltype(&cuCtxGetCurrent) ctx_get_current;
  decltype(&cuEventCreate) event_create;
  decltype(&cuEventRecord) event_record;
  decltype(&cuEventQuery) event_query;
  decltype(&cuStreamQuery) stream_query;
  decltype(&cuStreamIsCapturing) stream_is_capturing;
  decltype(&cuFuncGetName) func_get_name;
  decltype(&cuKernelGetName) kernel_get_name;
};
CudaCalls g_cu;

uint64_t Context() {
  CUcontext ctx = nullptr;
  return g_cu.ctx_get_current(&ctx) == CUDA_SUCCESS ? reinterpret_cast<uint64_t>(ctx) : 0;
}
int CreateEvent(void** event) {
  return g_cu.event_create(reinterpret_cast<CUevent*>(event), CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS ? 0 : -1;
}
int RecordEventOn(void* event, void* stream) {
  return g_cu.event_record(static_cast<CUevent>(event), static_cast<CUstream>(stream)) == CUDA_SUCCESS ? 0 : -1;
}
int QueryEvent(void* event) {
  CUresult r = g_cu.event_query(static_cast<CUevent>(event));
  return r == CUDA_SUCCESS ? 0 : r == CUDA_ERROR_NOT_READY ? 1 : -1;
}
int QueryStream(void* stream) {
  CUresult r = g_cu.stream_query(static_cast<CUstream>(stream));
  return r == CUDA_SUCCESS ? 0 : r == CUDA_ERROR_NOT_READY ? 1 : -1;
}
bool Capturing(void* stream) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  return g_cu.stream_is_capturing &&
         g_cu.stream_is_capturing(static_cast<CUstream>(stream), &st) == CUDA_SUCCESS &&
         st != CU_STREAM_CAPTURE_STATUS_NONE;
}

const Backend kCuda = {"cuda", Context, CreateEvent, RecordEventOn, QueryEvent, QueryStream, Capturing};

// Calls whose ABI changed with a CUDA version: a lookup for `cuda_version`
// or later gets the function of `wrapper`.
struct Versioned {
  const char* symbol;
  int from_version;
  const char* wrapper;
};
constexpr Versioned kVersioned[] = {
    {"cuCtxSynchronize", 13000, "cuCtxSynchronize_v2"},
    {"cuGetProcAddress", 12000, "cuGetProcAddress_v2"},
};

using GetProcV1 = CUresult (*)(const char*, void**, int, cuuint64_t);
using GetProcV2 = CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
GetProcV1 g_real_get_proc_v1;
GetProcV2 g_real_get_proc_v2;

// What a cuGetProcAddress lookup returned, wrapped when it is one of ours
// and its ABI is the one our wrapper has.
void* WrapProc(const char* symbol, void* fn, int cuda_version, cuuint64_t flags) {
  if (!fn || !symbol) return fn;
  std::string name = symbol;
  for (const Versioned& v : kVersioned) {
    if (name == v.symbol && cuda_version >= v.from_version) name = v.wrapper;
  }
  // The per-thread-default-stream variant stays distinct.
  if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && FindSymbol((name + "_ptsz").c_str())) {
    name += "_ptsz";
  }
  if (!FindSymbol(name.c_str())) return fn;
  // A newer CUDA than the headers we were built with may have given the
  // call a new ABI: wrap only when the newer lookup returns the same function
  // as a lookup for our version.
  if (cuda_version > CUDA_VERSION && g_real_get_proc_v2) {
    void* known = nullptr;
    CUdriverProcAddressQueryResult status;
    if (g_real_get_proc_v2(symbol, &known, CUDA_VERSION, flags, &status) != CUDA_SUCCESS || known != fn) return fn;
  }
  return WrapLookup(name.c_str(), fn);
}

}  // namespace

const Backend* CudaBackend() {
  static const Backend* backend = [] {
    g_cu.ctx_get_current = Driver<decltype(&cuCtxGetCurrent)>("cuCtxGetCurrent");
    g_cu.event_create = Driver<decltype(&cuEventCreate)>("cuEventCreate");
    g_cu.event_record = Driver<decltype(&cuEventRecord)>("cuEventRecord");
    g_cu.event_query = Driver<decltype(&cuEventQuery)>("cuEventQuery");
    g_cu.stream_query = Driver<decltype(&cuStreamQuery)>("cuStreamQuery");
    g_cu.stream_is_capturing = Driver<decltype(&cuStreamIsCapturing)>("cuStreamIsCapturing");
    g_cu.func_get_name = Driver<decltype(&cuFuncGetName)>("cuFuncGetName");
    g_cu.kernel_get_name = Driver<decltype(&cuKernelGetName)>("cuKernelGetName");
    bool ok = g_cu.ctx_get_current && g_cu.event_create && g_cu.event_record && g_cu.event_query && g_cu.stream_query;
    return ok ? &kCuda : nullptr;
  }();
  return backend;
}

uint32_t CudaFunctionName(const void* cufunc) {
  return CachedName(cufunc, [](const void* f) -> const char* {
    const char* name = nullptr;
    if (!CudaBackend() || !g_cu.func_get_name) return nullptr;
    return g_cu.func_get_name(&name, static_cast<CUfunction>(const_cast<void*>(f))) == CUDA_SUCCESS ? name : nullptr;
  });
}

uint32_t CudaKernelName(const void* cukernel) {
  return CachedName(cukernel, [](const void* k) -> const char* {
    const char* name = nullptr;
    if (!CudaBackend() || !g_cu.kernel_get_name) return nullptr;
    return g_cu.kernel_get_name(&name, static_cast<CUkernel>(const_cast<void*>(k))) == CUDA_SUCCESS ? name : nullptr;
  });
}

}  // namespace hangtrace::gpu

using namespace hangtrace::gpu;

// Not recorded (lookups are not where jobs hang); they only wrap what they
// hand out, so launches through driver entry points are traced too.
extern "C" __attribute__((visibility("default"))) CUresult cuGetProcAddress(const char* symbol, void** pfn,
                                                                            int cudaVersion, cuuint64_t flags);
extern "C" __attribute__((visibility("default"))) CUresult cuGetProcAddress_v2(
    const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags, CUdriverProcAddressQueryResult* symbolStatus);

namespace {
const GpuSymbol kLookupSymbols[] = {
    {"cuGetProcAddress", "cuGetProcAddress", hangtrace::fmt::Api::kCuda, hangtrace::fmt::Op::kOther, 0, false,
     reinterpret_cast<void*>(&cuGetProcAddress), reinterpret_cast<void**>(&g_real_get_proc_v1), nullptr},
    {"cuGetProcAddress_v2", "cuGetProcAddress", hangtrace::fmt::Api::kCuda, hangtrace::fmt::Op::kOther, 0, false,
     reinterpret_cast<void*>(&cuGetProcAddress_v2), reinterpret_cast<void**>(&g_real_get_proc_v2), nullptr},
};
}  // namespace

void hangtrace::gpu::KnowCudaLookups() { KnowSymbols(kLookupSymbols, 2); }

extern "C" CUresult cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags) {
  auto real = Real(g_real_get_proc_v1, kLookupSymbols[0]);
  if (!real) return CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;
  Real(g_real_get_proc_v2, kLookupSymbols[1]);  // for WrapProc's ABI check
  CUresult r = real(symbol, pfn, cudaVersion, flags);
  if (r == CUDA_SUCCESS && pfn && hangtrace::TraceWanted()) *pfn = WrapProc(symbol, *pfn, cudaVersion, flags);
  return r;
}

extern "C" CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                                        CUdriverProcAddressQueryResult* symbolStatus) {
  auto real = Real(g_real_get_proc_v2, kLookupSymbols[1]);
  if (!real) return CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;
  CUresult r = real(symbol, pfn, cudaVersion, flags, symbolStatus);
  if (r == CUDA_SUCCESS && pfn && hangtrace::TraceWanted()) *pfn = WrapProc(symbol, *pfn, cudaVersion, flags);
  return r;
}
