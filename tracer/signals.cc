// The signals the runtime handles (the stack-capture signal, the fatal
// signals it records, SIGTERM), and the program's own view of them.
//
// The traced program must behave exactly as untraced, so the runtime never
// changes what the program sees of its own signal setup (sigaction and
// signal are interposed, interpose/signals.cc):
//   * Where the runtime's handler stands in for the default, the program
//     reads the default (Rust, CPython and others install theirs only over
//     the default one).
//   * A handler the program installs takes effect as it asked, with its own
//     flags (SA_RESTART or not, SA_RESETHAND, its mask): the runtime steps
//     aside for that signal and records nothing of it. A program that
//     handles its own SIGSEGVs is not a crash; its SIGTERM handler
//     interrupts a blocking read() as it would untraced.
//   * The program setting SIG_DFL again gives the signal back to the
//     runtime (it records, then does the default).
//   * Handlers an MPI library installs while MPI_Init runs are the
//     library's: after MPI_Init the runtime stands in front of them again,
//     chaining to them (it records the crash before Open MPI's handler
//     prints and exits), except for the signals the program took.
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tracer/internal.h"
#include "tracer/runtime.h"

namespace hangtrace {
namespace {

const int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
// The signal launchers and schedulers end a job with (mpirun, slurmstepd,
// scancel, a time limit): recorded, then handled as before. Not SIGINT:
// CPython installs its KeyboardInterrupt handler only over the default one.
const int kTermSignals[] = {SIGTERM};

constexpr int kSignals = 65;
// Plain data, zero at load: the runtime installs its handlers from the
// preload constructor, before this library's own static initializers run
// (a constructor here would reset what was installed).
struct Disposition {
  bool ours;                  // the runtime's handler is installed
  bool program;               // the program installed its own: the runtime steps aside
  struct sigaction previous;  // what the runtime's handler chains to
  struct sigaction view;      // what the program reads (with `ours`)
};
Disposition g_signal[kSignals];
// MPI_Init (or another library's initialization) runs: what it installs is
// the library's, not the program's.
volatile bool g_library_init = false;

}  // namespace
}  // namespace hangtrace

// glibc's sigaction under its other public name: the runtime's own installs
// never go through the interposed `sigaction`.
extern "C" int __sigaction(int sig, const struct sigaction* act, struct sigaction* old);

namespace hangtrace {
namespace {

int RealSigaction(int sig, const struct sigaction* act, struct sigaction* old) { return __sigaction(sig, act, old); }

bool Hooked(int sig) {
  if (sig == StackSignal()) return true;
  for (int s : kFatalSignals) {
    if (s == sig) return true;
  }
  for (int s : kTermSignals) {
    if (s == sig) return true;
  }
  return false;
}

// Installs `handler` for `sig` in front of what is there now, unless the
// program took the signal, ignores it, or it is ours already.
void Install(int sig, void (*handler)(int, siginfo_t*, void*), int flags) {
  Disposition& d = g_signal[sig];
  if (d.program) return;
  struct sigaction old;
  if (RealSigaction(sig, nullptr, &old) != 0) return;
  if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN) return;  // keep ignored
  if ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction == handler) return;
  d.previous = old;
  if (!d.ours) d.view = old;  // what the program saw before the runtime came
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = flags;
  sa.sa_sigaction = handler;
  if (RealSigaction(sig, &sa, nullptr) == 0) d.ours = true;
}

}  // namespace

int StackSignal() { return SIGRTMAX - 5; }

int CurrentSigaction(int sig, struct sigaction* out) { return RealSigaction(sig, nullptr, out); }

void InstallSignalHandlers() {
  // SA_RESTART: a thread interrupted in a restartable system call resumes it.
  Install(StackSignal(), StackSignalHandler, SA_SIGINFO | SA_RESTART);
  for (int sig : kFatalSignals) Install(sig, FatalSignalHandler, SA_SIGINFO | SA_ONSTACK);
  EnsureAltStack();  // the thread that starts the runtime: main, usually
  for (int sig : kTermSignals) Install(sig, TermSignalHandler, SA_SIGINFO | SA_RESTART);
}

void LibraryInitializing(bool running) { g_library_init = running; }

int ProgramSigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (sig <= 0 || sig >= kSignals || !Hooked(sig)) return RealSigaction(sig, act, old);
  Disposition& d = g_signal[sig];
  const bool to_default = act && !(act->sa_flags & SA_SIGINFO) && act->sa_handler == SIG_DFL;
  if (g_library_init) {
    // A library initializing (MPI_Init): its handler takes effect; it
    // chains to what it is told was there, the program's view.
    const struct sigaction seen = d.view;
    const bool hide = d.ours;
    const int rc = RealSigaction(sig, act, hide ? nullptr : old);
    if (rc == 0 && hide && old) *old = seen;
    if (rc == 0 && act) {
      d.ours = false;  // until InstallSignalHandlers stands in front again
      d.view = *act;
    }
    return rc;
  }
  if (!d.ours) {
    // The runtime is not in front: the kernel's disposition is the truth.
    const int rc = RealSigaction(sig, act, old);
    if (rc == 0 && act) {
      d.program = !to_default;
      // Given back to the default: the runtime records it again.
      if (to_default && sig != StackSignal() && RuntimeConfig().stacks && g_trace) InstallSignalHandlers();
    }
    return rc;
  }
  if (old) *old = d.view;
  if (!act) return 0;
  if (to_default && sig != StackSignal()) {
    // Back to the default: the runtime records it, then does the default.
    d.view = *act;
    d.previous = *act;
    d.program = false;
    return 0;
  }
  // The program's own handler, exactly as it asked: the runtime steps aside.
  const int rc = RealSigaction(sig, act, nullptr);
  if (rc == 0) {
    d.ours = false;
    d.program = true;
    d.view = *act;
  }
  return rc;
}

// Hands `sig` to the handler that was there before ours, or to the default
// action; `resend`: send it again (it stays pending while this handler runs
// and is delivered on return).
void ChainToPrevious(int sig, siginfo_t* info, void* uc, bool resend) {
  const struct sigaction& prev = g_signal[sig].previous;
  if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
    prev.sa_sigaction(sig, info, uc);
    return;
  }
  if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
    return;
  }
  RealSigaction(sig, &prev, nullptr);
  g_signal[sig].ours = false;
  if (resend) syscall(SYS_tgkill, getpid(), int(syscall(SYS_gettid)), sig);
}

}  // namespace hangtrace
