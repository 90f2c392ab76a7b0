/* A program for the runtime tests, traced only through LD_PRELOAD: it knows
 * the C API as weak symbols, so it also runs (untraced) without the library.
 *
 * usage: traced_prog MODE [N]
 *   events N     N regions, then exit 0
 *   labels N     N marks and N regions named by one label longer than the
 *                call table keeps (45 bytes), then exit 0
 *   kill N       N regions, enter one more and SIGKILL itself inside it
 *   hold         enter a region and block forever in stuck_in_here()
 *   reuse-stderr FILE
 *                close fd 2, open FILE (it gets fd 2), then as hold
 *   idle         three regions, then block forever on a condition
 *                variable in waits_outside() (a call hangtrace does not
 *                trace), while a thread sleeps 2 s and prints what sleep()
 *                left ("sleep left 0": no signal cut it short)
 *   segv         N regions, then a NULL store in crash_here()
 *   probe-mpi    prints whether dlsym(RTLD_DEFAULT, "MPI_Init") finds MPI
 *   exit N       exit(N) after two regions
 *   fork         regions in parent and child; the child exits 0; exit 0
 *   fork-in-call three regions, then a fork inside a fourth, which parent
 *                and child both end; the child then makes regions of its
 *                own and exits 0; exit 0
 *   exec         one region, then exec itself as `traced_prog events 3`
 *   threads N    N threads doing regions concurrently, plus the main thread
 *   dlnext       dlsym(RTLD_NEXT) from the program itself still finds the
 *                next definition (libc's), with hangtrace's dlsym in between;
 *                exits 0 when it does
 *   overflow     enters a region, then recurses until the stack overflows
 *   blocked      a thread blocks hangtrace's capture signal (SIGRTMAX-5);
 *                main sits 2 s in a region (a watchdog of 0.5 s captures);
 *                the thread then prints pending=1 if the signal waits on it
 *   park N       N threads parked in parked_thread(), main in a region in
 *                stuck_in_here(); SIGUSR1 makes it exit 0 (for the dump tests)
 *   hold-thread  a thread named "worker5" enters a region and blocks in
 *                stuck_in_here(); main waits for it
 *   late-thread F  one region, then a thread of regions once the file F
 *                exists (the test fills the storage meanwhile)
 */
#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int hangtrace_enabled(void) __attribute__((weak));
int hangtrace_region(const char* name) __attribute__((weak));
int hangtrace_mark(const char* label) __attribute__((weak));
int hangtrace_begin(int region, uint64_t arg) __attribute__((weak));
int hangtrace_end(int region) __attribute__((weak));

static int region(const char* name) { return hangtrace_region ? hangtrace_region(name) : -1; }
static void begin(int r, uint64_t a) { if (hangtrace_begin) hangtrace_begin(r, a); }
static void end(int r) { if (hangtrace_end) hangtrace_end(r); }

static void regions(int r, int n) {
  for (int i = 0; i < n; ++i) {
    begin(r, (uint64_t)i);
    end(r);
  }
}

__attribute__((noinline)) void stuck_in_here(void) {
  for (;;) pause();
}

__attribute__((noinline)) void waits_outside(void) {
  static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
  static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
  pthread_mutex_lock(&m);
  for (;;) pthread_cond_wait(&c, &m);
}

static void* sleeper(void* arg) {
  (void)arg;
  unsigned left = sleep(2);
  printf("sleep left %u\n", left);
  fflush(stdout);
  return NULL;
}

__attribute__((noinline)) void crash_here(volatile int* p) {
  *p = 42;
  __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) static void* parked_thread(void* arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

/* Recurses until the stack overflows, on purpose (the SIGSEGV test). */
#pragma GCC diagnostic ignored "-Winfinite-recursion"
__attribute__((noinline)) int recurse_forever(int depth) {
  volatile char pad[512];
  pad[0] = (char)depth;
  return recurse_forever(depth + 1) + pad[0];
}

static volatile int g_blocked_ready = 0;
static void* blocking_thread(void* arg) {
  (void)arg;
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGRTMAX - 5);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  g_blocked_ready = 1;
  /* Running, not asleep: a thread blocked in a call is read without the
   * signal, whatever its mask; a running one would be signalled. */
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  do {
    clock_gettime(CLOCK_MONOTONIC, &now);
  } while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < 1500);
  sigset_t pending;
  sigpending(&pending);
  printf("pending=%d\n", sigismember(&pending, SIGRTMAX - 5));
  fflush(stdout);
  return NULL;
}

static void* holding_thread(void* arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "worker5");
  int r = region("test_call");
  begin(r, 7);
  stuck_in_here();
  return NULL;
}

static void exit_now(int sig) {
  (void)sig;
  _exit(0);
}

static void* thread_main(void* arg) {
  int r = region("thread_work");
  regions(r, (int)(intptr_t)arg);
  return NULL;
}

/* first-calls: threads whose first traced calls are the process's first,
   all at once: one of them makes the file, none records into a call table
   not yet filled. */
static pthread_barrier_t g_start_line;
static void* racing_thread(void* arg) {
  pthread_barrier_wait(&g_start_line);
  int r = region("thread_work");
  regions(r, (int)(intptr_t)arg);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* mode = argv[1];
  int n = argc > 2 ? atoi(argv[2]) : 10;
  if (!strcmp(mode, "first-calls")) {
    pthread_t th[64];
    if (n > 64) n = 64;
    pthread_barrier_init(&g_start_line, NULL, (unsigned)n);
    for (int i = 0; i < n; ++i) pthread_create(&th[i], NULL, racing_thread, (void*)(intptr_t)100);
    for (int i = 0; i < n; ++i) pthread_join(th[i], NULL);
    return 0;
  }
  int r = region("test_call");
  printf("traced=%d\n", hangtrace_enabled ? hangtrace_enabled() : 0);
  fflush(stdout);

  if (!strcmp(mode, "events")) {
    regions(r, n);
    return 0;
  }
  if (!strcmp(mode, "labels")) {
    const char* label = "a_label_longer_than_the_forty_bytes_kept_here";
    for (int i = 0; i < n; i++) {
      if (hangtrace_mark) hangtrace_mark(label);
      begin(region(label), (uint64_t)i);
      end(region(label));
    }
    return 0;
  }
  if (!strcmp(mode, "kill")) {
    regions(r, n);
    begin(r, 4242);
    kill(getpid(), SIGKILL);
    return 1;
  }
  if (!strcmp(mode, "idle")) {
    regions(r, 3);
    pthread_t t;
    pthread_create(&t, NULL, sleeper, NULL);
    waits_outside();
  }
  if (!strcmp(mode, "hold")) {
    regions(r, 3);
    begin(r, 7);
    stuck_in_here();
  }
  if (!strcmp(mode, "reuse-stderr")) {
    /* Closes its stderr and opens a data file, which gets fd 2, as a
     * program that owns its descriptors may; then hangs in a call. */
    close(2);
    int data = open(argc > 2 ? argv[2] : "data.out", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (data != 2) return 3;
    if (write(data, "data\n", 5) != 5) return 4;
    regions(r, 3);
    begin(r, 7);
    stuck_in_here();
  }
  if (!strcmp(mode, "dlnext")) {
    void* next = dlsym(RTLD_NEXT, "getpid");
    void* libc = dlvsym(RTLD_DEFAULT, "getpid", "GLIBC_2.2.5");
    void* none = dlsym(RTLD_NEXT, "hangtrace_no_such_symbol");
    /* The next dlsym after the program is the preloaded library's (the
     * program's own &dlsym); searching after hangtrace would give libc's. */
    void* next_dlsym = dlsym(RTLD_NEXT, "dlsym");
    printf("next=%p libc=%p none=%p next_dlsym=%p own=%p\n", next, libc, none, next_dlsym, (void*)&dlsym);
    return next && next == libc && !none && next_dlsym == (void*)&dlsym ? 0 : 1;
  }
  if (!strcmp(mode, "probe-mpi")) {
    /* A program without MPI that probes for it, as plugins do. */
    printf("MPI_Init=%s\n", dlsym(RTLD_DEFAULT, "MPI_Init") ? "found" : "absent");
    return 0;
  }
  if (!strcmp(mode, "overflow")) {
    begin(r, 21);
    return recurse_forever(0);
  }
  if (!strcmp(mode, "blocked")) {
    pthread_t th;
    pthread_create(&th, NULL, blocking_thread, NULL);
    while (!g_blocked_ready) usleep(1000);
    begin(r, 7);
    usleep(2000 * 1000);
    end(r);
    pthread_join(th, NULL);
    return 0;
  }
  if (!strcmp(mode, "park")) {
    signal(SIGUSR1, exit_now);
    pthread_t th;
    for (int i = 0; i < n; ++i) pthread_create(&th, NULL, parked_thread, NULL);
    printf("parked\n");
    fflush(stdout);
    begin(r, 9);
    stuck_in_here();
  }
  if (!strcmp(mode, "segv")) {
    regions(r, n);
    begin(r, 13);
    crash_here(NULL);
    return 1;
  }
  if (!strcmp(mode, "exit")) {
    regions(r, 2);
    exit(n);
  }
  if (!strcmp(mode, "fork")) {
    regions(r, 5);
    pid_t pid = fork();
    if (pid == 0) {
      int c = region("child_call");
      regions(c, 7);
      _exit(0);
    }
    regions(r, 5);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
  }
  if (!strcmp(mode, "fork-in-call")) {
    /* The region the fork comes in began on the record path's short way
       (the thread was attached by the first three), whose END takes no
       test: in the child it must reach no file (its parent's is unmapped
       there, and not its own). */
    regions(r, 3);
    begin(r, 77);
    pid_t pid = fork();
    end(r);
    if (pid == 0) {
      int c = region("child_call");
      regions(c, 4);
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
  }
  if (!strcmp(mode, "exec")) {
    regions(r, 1);
    execl(argv[0], argv[0], "events", "3", (char*)NULL);
    return 1;
  }
  if (!strcmp(mode, "hold-thread")) {
    pthread_t th;
    pthread_create(&th, NULL, holding_thread, NULL);
    pthread_join(th, NULL);
    return 0;
  }
  if (!strcmp(mode, "late-thread") && argc > 2) {
    /* A traced call, then a thread that starts once the file argv[2]
       exists (the test fills the trace folder's storage meanwhile). */
    regions(r, 1);
    for (int i = 0; i < 3000 && access(argv[2], F_OK) != 0; ++i) usleep(10000);
    pthread_t th;
    pthread_create(&th, NULL, thread_main, (void*)(intptr_t)10);
    pthread_join(th, NULL);
    return 0;
  }
  if (!strcmp(mode, "threads")) {
    pthread_t th[64];
    if (n > 64) n = 64;
    for (int i = 0; i < n; ++i) pthread_create(&th[i], NULL, thread_main, (void*)(intptr_t)1000);
    regions(r, 1000);
    for (int i = 0; i < n; ++i) pthread_join(th[i], NULL);
    return 0;
  }
  return 2;
}
