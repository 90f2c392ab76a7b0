// Entry point of libhangtrace.so: starts the runtime when the library is
// loaded (LD_PRELOAD or linked), before main() and before any wrapper runs,
// and registers every wrapped call in the trace file's call table.
#include "interpose/mpi_support.h"
#if HANGTRACE_HAVE_GPU
#include "interpose/gpu_support.h"
#endif
#include "tracer/config.h"
#include "tracer/runtime.h"

namespace {

__attribute__((constructor(101))) void HangtraceStart() {
  if (hangtrace::StartRuntime(hangtrace::Config::FromEnvironment())) {
    hangtrace::mpi::RegisterMpiCalls();
#if HANGTRACE_HAVE_NCCL
    hangtrace::gpu::RegisterNcclCalls();
#endif
#if HANGTRACE_HAVE_CUDA
    hangtrace::gpu::RegisterCudaCalls();
    hangtrace::gpu::RegisterCudaLookups();
#endif
#if HANGTRACE_HAVE_HIP
    hangtrace::gpu::RegisterHipCalls();
    hangtrace::gpu::RegisterHipLookups();
#endif
  }
}

}  // namespace
