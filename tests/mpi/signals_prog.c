/* An MPI program with signal handlers of its own, to compare traced and
 * untraced runs: whatever hangtrace does with signals, the program must see
 * and get exactly what it would untraced. Run with mpirun -np 1.
 *
 *   query         prints the disposition of SIGSEGV, SIGBUS and SIGTERM before
 *                 MPI_Init ("default" or "other"), as Rust's and CPython's
 *                 runtimes ask before installing theirs; exits 0
 *   term-before   installs a SIGTERM handler without SA_RESTART before
 *                 MPI_Init, prints "ready PID", and blocks in read() on a
 *                 pipe: a SIGTERM interrupts it ("read: Interrupted system
 *                 call"), exit 3
 *   term-after    the same, the handler installed after MPI_Init
 *   segv-handled  handles 1000 SIGSEGVs of its own (siglongjmp out of the
 *                 handler) installed before MPI_Init, then exits 0: no crash
 */
#include <errno.h>
#include <mpi.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t terms = 0;
static void on_term(int sig) {
  (void)sig;
  terms++;
}

static sigjmp_buf again;
static volatile int faults = 0;
static void on_segv(int sig) {
  (void)sig;
  faults++;
  siglongjmp(again, 1);
}

static const char* disposition(int sig) {
  struct sigaction old;
  sigaction(sig, NULL, &old);
  return (old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler == SIG_DFL ? "default" : "other";
}

static void install_term(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_term;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0; /* no SA_RESTART: a blocking read() returns EINTR */
  sigaction(SIGTERM, &sa, NULL);
}

static int wait_for_term(void) {
  int fds[2];
  char c;
  if (pipe(fds) != 0) return 1;
  printf("ready %d\n", (int)getpid());
  fflush(stdout);
  ssize_t n = read(fds[0], &c, 1); /* nobody writes: only a signal ends it */
  if (n < 0) printf("read: %s (%d SIGTERM)\n", strerror(errno), (int)terms);
  else printf("read returned %zd\n", n);
  fflush(stdout);
  return n < 0 && errno == EINTR ? 3 : 1;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "query";
  int rc = 0;
  if (!strcmp(mode, "query")) {
    printf("SIGSEGV %s, SIGBUS %s, SIGTERM %s\n", disposition(SIGSEGV), disposition(SIGBUS), disposition(SIGTERM));
    MPI_Init(&argc, &argv);
  } else if (!strcmp(mode, "term-before")) {
    install_term();
    MPI_Init(&argc, &argv);
    rc = wait_for_term();
  } else if (!strcmp(mode, "term-after")) {
    MPI_Init(&argc, &argv);
    install_term();
    rc = wait_for_term();
  } else if (!strcmp(mode, "segv-handled")) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_segv;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NODEFER;
    sigaction(SIGSEGV, &sa, NULL);
    MPI_Init(&argc, &argv);
    int x = 1, y = 0;
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    while (faults < 1000) {
      if (sigsetjmp(again, 1) == 0) *(volatile int*)(uintptr_t)8 = 1;
    }
    printf("handled %d faults\n", (int)faults);
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  if (rc == 0) MPI_Finalize();
  return rc;
}
