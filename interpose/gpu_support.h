// What the generated NCCL/CUDA/HIP wrappers (gpu_<api>.gen.cc, from
// gpu.spec) call: finding the real functions, the symbol table behind the
// dlsym and get-proc-address wrappers, NCCL communicators and groups, kernel
// names, device completion and blocking-launch mode.
//
// This header includes no vendor header: the CUDA and HIP headers cannot meet
// in one translation unit, so streams, functions and communicators are
// opaque pointers here, and each API's own file (gpu_nccl.cc, gpu_cuda.cc,
// gpu_hip.cc) converts.
//
// Device completion: after each traced collective, point-to-point call and
// kernel launch (after the outermost ncclGroupEnd for grouped operations) an
// event from a pool created up front is recorded on the call's stream, and a
// DEVICE_PENDING record (aux: track id) goes into the thread's lane. A poller
// thread queries the pending events and writes a COMPLETE record with the
// same track id when one has fired. The poller holds no lock while it calls
// into the driver (a query on a broken device can hang), and the wrappers
// never wait for it.
#pragma once

#include <cstdint>

#include "interpose/dlsym.h"
#include "tracer/runtime.h"

// Hidden, as tracer/runtime.h: reached directly from the wrappers.
#pragma GCC visibility push(hidden)
namespace hangtrace::gpu {

// --- the symbol table -----------------------------------------------------------

struct GpuSymbol {
  const char* name;   // exported name: "cuLaunchKernel_ptsz"
  const char* base;   // the call it is a variant of: "cuLaunchKernel"
  fmt::Api api;
  fmt::Op op;
  uint8_t flags;      // fmt::CallFlags
  bool ptsz;          // per-thread-default-stream variant (_ptsz, _spt)
  void* wrapper;      // our exported function
  void** real;        // where the real function is kept
  uint16_t* call;     // its index in this process's call table; null: not recorded
};

// Each generated file's table, known from start-up (the names the lookup
// wrappers know, before any trace file exists).
void KnowSymbols(const GpuSymbol* table, int count);
void KnowNcclSymbols();
void KnowCudaSymbols();
void KnowHipSymbols();
// The get-proc-address wrappers (hand-written, not recorded: call == null).
void KnowCudaLookups();
void KnowHipLookups();
// Enters every known symbol that is recorded into the new trace file's call
// table (when the file is made: at start-up or at the first traced call).
void RegisterGpuCalls();

// The symbol `name` as the lookup wrappers see it, or null.
const GpuSymbol* FindSymbol(const char* name);
// A real function handed out by a lookup (dlsym, cuGetProcAddress): keeps
// it as the symbol's real function and returns our wrapper for it, or
// returns `real` unchanged when it is not one we wrap (or is already ours).
void* WrapLookup(const char* name, void* real);

// Finds the real function the first time: the slot filled by a lookup, then
// dlsym(RTLD_NEXT), then the API's library already loaded RTLD_LOCAL
// (dlopen RTLD_NOLOAD), then NCCL's pnccl* alias. Null (with one stderr line)
// when none exists.
void* ResolveReal(const GpuSymbol& s);

// A function of `api`'s libraries as loaded now, never one of our wrappers:
// the global scope, then a library loaded RTLD_LOCAL. For the calls the
// wrappers use themselves (events, names, NCCL's queries). Null when absent.
void* FindLoaded(const char* name, fmt::Api api);
template <typename F>
F FindLoaded(const char* name, fmt::Api api) {
  return reinterpret_cast<F>(FindLoaded(name, api));
}

template <typename F>
F* Real(F*& slot, const GpuSymbol& s) {
  F* f = __atomic_load_n(&slot, __ATOMIC_ACQUIRE);
  if (__builtin_expect(!f, 0)) {
    f = reinterpret_cast<F*>(ResolveReal(s));
    __atomic_store_n(&slot, f, __ATOMIC_RELEASE);
  }
  return f;
}

// --- records ----------------------------------------------------------------------

// The first traced call of a process started lazily makes its file.
inline bool Tracing() {
  if (__builtin_expect(g_trace != nullptr, 1)) return t_thread.depth == 0;
  return g_start_pending && t_thread.depth == 0 && StartAtFirstCall();
}


// --- NCCL (gpu_nccl.cc) --------------------------------------------------------------

// The communicator's index in the file's table; one never seen created (made
// before tracing began, or by a call not wrapped) is registered on first use.
uint16_t NcclComm(const void* comm);
uint8_t NcclDtype(int datatype);
uint8_t NcclRedop(int op);
// ncclSuccess, or ncclInProgress of a nonblocking communicator: the
// operation was accepted and will run.
inline bool NcclAccepted(int result) { return result == 0 || result == 7; }

// Groups: ncclGroupStart/End nest; operations inside carry the group id
// (kRecInGroup, aux) and are handed to the device by the outermost End.
void GroupOpened();
void InGroup(fmt::Record& r);
// After ncclGroupEnd returned: on the outermost one, tracks the group's
// operations (and blocks on their streams in blocking mode) when `accepted`.
void GroupClosed(bool accepted);
// After a collective or point-to-point call was accepted: tracked on its
// stream now, or at the outermost ncclGroupEnd when inside a group.
void NcclEnqueued(const fmt::Record& r);

// --- kernels -------------------------------------------------------------------------

enum class Device : uint8_t { Nccl, Cuda, Hip };

// Name-table index + 1 of a kernel (0: unknown), cached per function.
uint32_t HostFuncName(const void* func);       // host stub (runtime API): dladdr
uint32_t CudaFunctionName(const void* cufunc); // CUfunction: cuFuncGetName
uint32_t CudaKernelName(const void* cukernel); // cudaKernel_t / CUkernel: cuKernelGetName
uint32_t HipFunctionName(const void* hipfunc); // hipFunction_t: hipKernelNameRef
// The cache behind the three: `lookup` runs once per function.
uint32_t CachedName(const void* key, const char* (*lookup)(const void*));

// After a kernel launch succeeded: tracked, and in blocking mode waited for.
void Launched(const fmt::Record& r, Device api);

// --- devices (gpu_cuda.cc, gpu_hip.cc) ------------------------------------------------

// The few driver calls device completion needs, resolved without our
// wrappers. Every function returns 0 on success.
struct Backend {
  const char* name;
  // A key for the current context (CUcontext, HIP device + 1); 0: none.
  uint64_t (*context)();
  int (*create_event)(void** event);
  int (*record_event)(void* event, void* stream);
  // 0: fired; 1: not yet; -1: error (the event is given up).
  int (*query_event)(void* event);
  // 0: idle; 1: busy; -1: error.
  int (*query_stream)(void* stream);
  bool (*capturing)(void* stream);
};
// Null when the API's library is not loaded.
const Backend* CudaBackend();
const Backend* HipBackend();

// The stream handle a per-thread-default-stream variant means by a null one.
inline void* EffectiveStream(uint64_t handle, bool ptsz) {
  return reinterpret_cast<void*>(handle == 0 && ptsz ? uintptr_t(2) : uintptr_t(handle));
}

}  // namespace hangtrace::gpu
#pragma GCC visibility pop
