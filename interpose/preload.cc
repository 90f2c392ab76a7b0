// Entry point of libhangtrace.so: starts the runtime when the library is
// loaded (LD_PRELOAD or linked), before main() and before any wrapper runs;
// the runtime registers every wrapped call in the trace file's call table
// when it makes the file.
#include "interpose/mpi_support.h"
#if HANGTRACE_HAVE_MPICH
#include "interpose/mpi_abi.h"
#endif
#if HANGTRACE_HAVE_GPU
#include "interpose/gpu_support.h"
#endif
#include <sys/syscall.h>
#include <unistd.h>

#include "tracer/config.h"
#include "tracer/runtime.h"

namespace {

// Every wrapped call into a new trace file's call table: run by the runtime
// when it makes the file (at start for a rank, else at the first traced
// call), before the file is published to other threads.
void RegisterCalls() {
  hangtrace::mpi::RegisterMpiCalls();
#if HANGTRACE_HAVE_MPICH
  hangtrace::mpich::RegisterMpiCalls();  // the same names: the same entries
#endif
#if HANGTRACE_HAVE_GPU
  hangtrace::gpu::RegisterGpuCalls();
#endif
}

__attribute__((constructor(101))) void HangtraceStart() {
  const hangtrace::Config config = hangtrace::Config::FromEnvironment();
  if (!config.off) {
    // The names the lookup wrappers (dlsym, cuGetProcAddress) know, before
    // any file: a process may look its functions up long before it calls.
#if HANGTRACE_HAVE_NCCL
    hangtrace::gpu::KnowNcclSymbols();
#endif
#if HANGTRACE_HAVE_CUDA
    hangtrace::gpu::KnowCudaSymbols();
    hangtrace::gpu::KnowCudaLookups();
#endif
#if HANGTRACE_HAVE_HIP
    hangtrace::gpu::KnowHipSymbols();
    hangtrace::gpu::KnowHipLookups();
#endif
  }
  hangtrace::StartRuntime(config, RegisterCalls);
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
