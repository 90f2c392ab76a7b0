// HIP's half of the GPU wrappers: the hipGetProcAddress wrapper, the runtime
// calls device completion uses, and kernel names of hipFunction_t.
#include <hip/hip_runtime_api.h>

#include <cstring>
#include <string>

#include "interpose/gpu_support.h"

namespace hangtrace::gpu {
namespace {

template <typename F>
F Hip(const char* name) {
  return FindLoaded<F>(name, fmt::Api::kHip);
}

// hipStreamIsCapturing arrived after the HIP these headers may be (5.2):
// declared here with its ABI (the status is an enum, int-sized).
using StreamIsCapturing = hipError_t (*)(hipStream_t, int*);

struct HipCalls {
  decltype(&hipGetDevice) get_device;
  decltype(&hipEventCreateWithFlags) event_create;
  decltype(&hipEventRecord) event_record;
  decltype(&hipEventQuery) event_query;
  decltype(&hipStreamQuery) stream_query;
  StreamIsCapturing stream_is_capturing;
  decltype(&hipKernelNameRef) kernel_name;
};
HipCalls g_hip;

uint64_t Context() {
  int device = -1;
  return g_hip.get_device(&device) == hipSuccess && device >= 0 ? uint64_t(device) + 1 : 0;
}
int CreateEvent(void** event) {
  return g_hip.event_create(reinterpret_cast<hipEvent_t*>(event), hipEventDisableTiming) == hipSuccess ? 0 : -1;
}
int RecordEventOn(void* event, void* stream) {
  return g_hip.event_record(static_cast<hipEvent_t>(event), static_cast<hipStream_t>(stream)) == hipSuccess ? 0 : -1;
}
int QueryEvent(void* event) {
  hipError_t r = g_hip.event_query(static_cast<hipEvent_t>(event));
  return r == hipSuccess ? 0 : r == hipErrorNotReady ? 1 : -1;
}
int QueryStream(void* stream) {
  hipError_t r = g_hip.stream_query(static_cast<hipStream_t>(stream));
  return r == hipSuccess ? 0 : r == hipErrorNotReady ? 1 : -1;
}
bool Capturing(void* stream) {
  int status = 0;  // hipStreamCaptureStatusNone
  return g_hip.stream_is_capturing && g_hip.stream_is_capturing(static_cast<hipStream_t>(stream), &status) == hipSuccess &&
         status != 0;
}

const Backend kHip = {"hip", Context, CreateEvent, RecordEventOn, QueryEvent, QueryStream, Capturing};

// hipGetProcAddress (HIP 6.2+), declared with its ABI: the query result is
// an int-sized enum; flag 2 asks for the per-thread-default-stream (_spt)
// variant.
using GetProc = hipError_t (*)(const char*, void**, int, uint64_t, int*);
constexpr uint64_t kHipPerThreadDefaultStream = 2;
GetProc g_real_get_proc;

}  // namespace

const Backend* HipBackend() {
  static const Backend* backend = [] {
    g_hip.get_device = Hip<decltype(&hipGetDevice)>("hipGetDevice");
    g_hip.event_create = Hip<decltype(&hipEventCreateWithFlags)>("hipEventCreateWithFlags");
    g_hip.event_record = Hip<decltype(&hipEventRecord)>("hipEventRecord");
    g_hip.event_query = Hip<decltype(&hipEventQuery)>("hipEventQuery");
    g_hip.stream_query = Hip<decltype(&hipStreamQuery)>("hipStreamQuery");
    g_hip.stream_is_capturing = Hip<StreamIsCapturing>("hipStreamIsCapturing");
    g_hip.kernel_name = Hip<decltype(&hipKernelNameRef)>("hipKernelNameRef");
    bool ok = g_hip.get_device && g_hip.event_create && g_hip.event_record && g_hip.event_query && g_hip.stream_query;
    return ok ? &kHip : nullptr;
  }();
  return backend;
}

uint32_t HipFunctionName(const void* hipfunc) {
  return CachedName(hipfunc, [](const void* f) -> const char* {
    if (!HipBackend() || !g_hip.kernel_name) return nullptr;
    return g_hip.kernel_name(static_cast<hipFunction_t>(const_cast<void*>(f)));
  });
}

}  // namespace hangtrace::gpu

using namespace hangtrace::gpu;

extern "C" __attribute__((visibility("default"))) hipError_t hipGetProcAddress(const char* symbol, void** pfn,
                                                                               int hipVersion, uint64_t flags,
                                                                               int* symbolStatus);
namespace {
const GpuSymbol kLookupSymbols[] = {
    {"hipGetProcAddress", "hipGetProcAddress", hangtrace::fmt::Api::kHip, hangtrace::fmt::Op::kOther, 0, false,
     reinterpret_cast<void*>(&hipGetProcAddress), reinterpret_cast<void**>(&g_real_get_proc), nullptr},
};
}  // namespace

void hangtrace::gpu::KnowHipLookups() { KnowSymbols(kLookupSymbols, 1); }

extern "C" hipError_t hipGetProcAddress(const char* symbol, void** pfn, int hipVersion, uint64_t flags,
                                        int* symbolStatus) {
  auto real = Real(g_real_get_proc, kLookupSymbols[0]);
  if (!real) return hipErrorSharedObjectSymbolNotFound;
  hipError_t r = real(symbol, pfn, hipVersion, flags, symbolStatus);
  if (r == hipSuccess && pfn && *pfn && symbol && hangtrace::TraceWanted()) {
    std::string name = symbol;
    if ((flags & kHipPerThreadDefaultStream) && FindSymbol((name + "_spt").c_str())) name += "_spt";
    *pfn = WrapLookup(name.c_str(), *pfn);
  }
  return r;
}
