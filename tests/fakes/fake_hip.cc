// FAKE libamdhip64.so.5 for tests only: the HIP calls hangtrace wraps or
// uses, with the ABI of the real hip_runtime_api.h, on the emulated device
// of fake_device.h. Not a GPU: kernels are sleeps.
#include <hip/hip_runtime_api.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "fake_device.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {
std::mutex g_mu;
std::unordered_map<const void*, const fake::Kernel*> g_kernels;
fake::Stream* S(hipStream_t s, bool spt) { return fake::ResolveStream(reinterpret_cast<uintptr_t>(s), spt); }

hipError_t Launch(const void* func, hipStream_t s, bool spt) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_kernels.find(func);
  if (it == g_kernels.end()) return hipErrorInvalidDeviceFunction;
  fake::Launch(it->second, S(s, spt));
  return hipSuccess;
}
}  // namespace

// --- fake-only ----------------------------------------------------------------------
FAKE_EXPORT void fake_hipRegisterKernel(const void* host_stub, const char* name, int ms) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_kernels[host_stub] = new fake::Kernel{name, ms};
}
FAKE_EXPORT hipFunction_t fake_hipFunction(const char* name, int ms) {
  return reinterpret_cast<hipFunction_t>(new fake::Kernel{name, ms});
}
FAKE_EXPORT unsigned long long fake_hipLastLaunchStream() { return fake::LastLaunchStream(); }
FAKE_EXPORT unsigned long long fake_hipStreamId(hipStream_t s, int spt) { return fake::StreamId(S(s, spt != 0)); }

// --- HIP ------------------------------------------------------------------------------
FAKE_EXPORT hipError_t hipGetDevice(int* d) {
  *d = 0;
  return hipSuccess;
}
FAKE_EXPORT hipError_t hipStreamCreate(hipStream_t* s) {
  *s = reinterpret_cast<hipStream_t>(fake::NewStream());
  return hipSuccess;
}
FAKE_EXPORT hipError_t hipStreamQuery(hipStream_t s) { return fake::Idle(S(s, false)) ? hipSuccess : hipErrorNotReady; }
FAKE_EXPORT hipError_t hipStreamSynchronize(hipStream_t s) {
  fake::Drain(S(s, false));
  return hipSuccess;
}
FAKE_EXPORT hipError_t hipStreamSynchronize_spt(hipStream_t s) {
  fake::Drain(S(s, true));
  return hipSuccess;
}
FAKE_EXPORT hipError_t hipDeviceSynchronize(void) {
  fake::DrainAll();
  return hipSuccess;
}
FAKE_EXPORT hipError_t hipEventCreateWithFlags(hipEvent_t* e, unsigned) {
  *e = reinterpret_cast<hipEvent_t>(new fake::Event());
  return hipSuccess;
}
FAKE_EXPORT hipError_t hipEventRecord(hipEvent_t e, hipStream_t s) {
  fake::RecordEvent(reinterpret_cast<fake::Event*>(e), S(s, false));
  return hipSuccess;
}
FAKE_EXPORT hipError_t hipEventQuery(hipEvent_t e) {
  return reinterpret_cast<fake::Event*>(e)->state.load() == 0 ? hipSuccess : hipErrorNotReady;
}
FAKE_EXPORT hipError_t hipEventSynchronize(hipEvent_t e) {
  while (hipEventQuery(e) == hipErrorNotReady) usleep(200);
  return hipSuccess;
}
FAKE_EXPORT hipError_t hipLaunchKernel(const void* f, dim3, dim3, void**, size_t, hipStream_t s) {
  return Launch(f, s, false);
}
FAKE_EXPORT hipError_t hipLaunchKernel_spt(const void* f, dim3, dim3, void**, size_t, hipStream_t s) {
  return Launch(f, s, true);
}
FAKE_EXPORT hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned, unsigned, unsigned, unsigned, unsigned,
                                             unsigned, unsigned, hipStream_t s, void**, void**) {
  if (!f) return hipErrorInvalidResourceHandle;
  fake::Launch(reinterpret_cast<const fake::Kernel*>(f), S(s, false));
  return hipSuccess;
}
FAKE_EXPORT const char* hipKernelNameRef(const hipFunction_t f) {
  return f ? reinterpret_cast<const fake::Kernel*>(f)->name.c_str() : nullptr;
}
// HIP 6.2's lookup (not in the 5.2 headers): flag 2 asks for the _spt variant.
FAKE_EXPORT hipError_t hipGetProcAddress(const char* symbol, void** pfn, int, uint64_t flags, int* status) {
  bool spt = flags & 2;
  std::string s = symbol;
  *pfn = nullptr;
  if (s == "hipLaunchKernel") *pfn = spt ? (void*)&hipLaunchKernel_spt : (void*)&hipLaunchKernel;
  if (s == "hipStreamSynchronize") *pfn = spt ? (void*)&hipStreamSynchronize_spt : (void*)&hipStreamSynchronize;
  if (s == "hipModuleLaunchKernel") *pfn = (void*)&hipModuleLaunchKernel;
  if (status) *status = *pfn ? 0 : 1;
  return *pfn ? hipSuccess : hipErrorNotFound;
}
