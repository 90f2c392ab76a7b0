// Entry point of libhangtrace.so: starts the runtime when the library is
// loaded (LD_PRELOAD or linked), before main() and before any wrapper runs,
// and registers every wrapped call in the trace file's call table.
#include "interpose/mpi_support.h"
#include "tracer/config.h"
#include "tracer/runtime.h"

namespace {

__attribute__((constructor(101))) void HangtraceStart() {
  if (hangtrace::StartRuntime(hangtrace::Config::FromEnvironment())) {
    hangtrace::mpi::RegisterMpiCalls();
  }
}

}  // namespace
