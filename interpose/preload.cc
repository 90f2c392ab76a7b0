// Entry point of libhangtrace.so: starts the runtime when the library is
// loaded (LD_PRELOAD or linked), before main() and before any wrapper runs,
// and registers every wrapped call in the trace file's call table.
#include "interpose/mpi_support.h"
#if HANGTRACE_HAVE_GPU
#include "interpose/gpu_support.h"
#endif
#include <sys/syscall.h>
#include <unistd.h>

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

// _exit and _Exit skip on_exit handlers; shells (dash) and fork children end
// this way. Without them the file would read "gone without an exit record:
// killed?" and one with nothing in it would stay. Same exit as glibc's:
// exit_group.
extern "C" {
__attribute__((visibility("default"), noreturn)) void _exit(int code) {
  hangtrace::RecordExit(code);
  for (;;) syscall(SYS_exit_group, code);
}
__attribute__((visibility("default"), noreturn)) void _Exit(int code) { _exit(code); }
}
