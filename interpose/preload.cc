// Entry point of libhangtrace.so: starts the runtime when the library is
// loaded (LD_PRELOAD or linked), before main() and before any wrapper runs.
#include "tracer/config.h"
#include "tracer/runtime.h"

namespace {

__attribute__((constructor(101))) void HangtraceStart() {
  hangtrace::StartRuntime(hangtrace::Config::FromEnvironment());
}

}  // namespace
