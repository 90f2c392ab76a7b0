// sigaction and signal, as the program calls them: the runtime keeps the
// program's view of its own signal setup (tracer/signals.cc), so the traced
// program sees and gets exactly what it would untraced.
#include <signal.h>
#include <string.h>

#include "tracer/runtime.h"

extern "C" {

__attribute__((visibility("default"))) int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  return hangtrace::ProgramSigaction(sig, act, old);
}

// glibc's signal(): BSD semantics, the handler stays and interrupted system
// calls restart; the signal is blocked while its handler runs.
__attribute__((visibility("default"))) sighandler_t signal(int sig, sighandler_t handler) {
  struct sigaction act, old;
  memset(&act, 0, sizeof(act));
  act.sa_handler = handler;
  sigemptyset(&act.sa_mask);
  if (sig > 0 && sig < 65) sigaddset(&act.sa_mask, sig);
  act.sa_flags = SA_RESTART;
  if (hangtrace::ProgramSigaction(sig, &act, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}

__attribute__((visibility("default"))) sighandler_t bsd_signal(int sig, sighandler_t handler) { return signal(sig, handler); }

}  // extern "C"
