/* Threads blocked in the system calls a signal would cut short, beside a
 * rank that hangtrace's watchdog flags: each call must return what it
 * returns untraced, after its untraced time. Run with mpirun -np 2, traced
 * and not, and compare the output (tests/test_mpi.cc).
 *
 *   in-mpi     rank 0's main thread waits in MPI_Barrier for 9 s (rank 1
 *              sleeps first): the watchdog fires on rank 0 and captures
 *              every thread's stack; rank 1, in no traced call past the
 *              timeout, takes its idle capture
 *   computing  both ranks compute for 9 s after an MPI call: each takes
 *              its idle capture while computing
 *
 * Two more threads are busy while it happens: one reads 32 MiB from
 * /dev/zero again and again (it spends its time in the kernel, where a
 * signal or a stop would cut the read short), one polls with a 1 ms
 * timeout in a loop (forever entering and leaving a call); each prints how
 * many of its calls came back short or with EINTR (0 untraced).
 *
 * Each rank creates $BLOCKED_CALLS_READY_DIR/ready.RANK, where that is
 * set, once its threads are at their calls.
 * Each blocking thread waits 8 s or $BLOCKED_CALLS_WAIT_S (or, for pause, until the main thread
 * signals it 1.5 s later) and prints one line: the call, its return value, its
 * errno and its time in whole seconds (rounded down). Linux never restarts nanosleep,
 * poll, select, epoll_wait, sem_timedwait, sigtimedwait, semtimedop or a
 * socket read with SO_RCVTIMEO after a signal handler ran (signal(7)), so a
 * stack capture that signalled these threads would show here as EINTR and
 * a shorter time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mpi.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ipc.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { kThreads = 11 };
/* 8 s, or $BLOCKED_CALLS_WAIT_S: a dump from outside on a loaded machine
 * needs a wider window to find the threads still in their calls. */
static int kWaitS = 8;

struct Result {
  const char* call;
  long rc;
  int err;
  double seconds;
};
static struct Result results[kThreads];
static sem_t never_posted;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never_signalled = PTHREAD_COND_INITIALIZER;
static pthread_t pause_thread;
static volatile sig_atomic_t usr1 = 0;

static void on_usr1(int sig) {
  (void)sig;
  usr1 = 1;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct timespec in_s(clockid_t clock, int s) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  ts.tv_sec += s;
  return ts;
}

/* One blocking call per thread, chosen by its index; named in the stack as
 * blocked_in (the tests look for it). */
static __attribute__((noinline)) long blocked_in(int i, const char** name) {
  switch (i) {
    case 0: {
      *name = "nanosleep";
      struct timespec ts = {kWaitS, 0};
      return nanosleep(&ts, NULL);
    }
    case 1:
      *name = "poll";
      return poll(NULL, 0, kWaitS * 1000);
    case 2: {
      *name = "select";
      struct timeval tv = {kWaitS, 0};
      return select(0, NULL, NULL, NULL, &tv);
    }
    case 3: {
      *name = "epoll_wait";
      int ep = epoll_create1(EPOLL_CLOEXEC);
      struct epoll_event ev;
      long rc = epoll_wait(ep, &ev, 1, kWaitS * 1000);
      int err = errno;
      close(ep);
      errno = err;
      return rc;
    }
    case 4: {
      *name = "sem_timedwait";
      struct timespec until = in_s(CLOCK_REALTIME, kWaitS);
      return sem_timedwait(&never_posted, &until);
    }
    case 5:
      *name = "sleep";
      return (long)sleep(kWaitS); /* the seconds left: 0 */
    case 6: {
      *name = "sigtimedwait";
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGUSR2);
      pthread_sigmask(SIG_BLOCK, &set, NULL);
      struct timespec ts = {kWaitS, 0};
      return sigtimedwait(&set, NULL, &ts);
    }
    case 7: {
      *name = "semtimedop";
      int id = semget(IPC_PRIVATE, 1, 0600);
      struct sembuf op = {0, -1, 0};
      struct timespec ts = {kWaitS, 0};
      long rc = semtimedop(id, &op, 1, &ts);
      int err = errno;
      semctl(id, 0, IPC_RMID);
      errno = err;
      return rc;
    }
    case 8: {
      *name = "recv(SO_RCVTIMEO)";
      int sv[2];
      socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
      struct timeval tv = {kWaitS, 0};
      setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      char c;
      long rc = recv(sv[0], &c, 1, 0);
      int err = errno;
      close(sv[0]);
      close(sv[1]);
      errno = err;
      return rc;
    }
    case 9: {
      *name = "pthread_cond_timedwait";
      struct timespec until = in_s(CLOCK_REALTIME, kWaitS);
      pthread_mutex_lock(&mu);
      int rc = pthread_cond_timedwait(&never_signalled, &mu, &until);
      pthread_mutex_unlock(&mu);
      errno = rc;
      return rc ? -1 : 0;
    }
    default:
      *name = "pause";
      return pause(); /* until the main thread's SIGUSR1 */
  }
}

static volatile int stop_busy = 0;
static long short_reads = 0, poll_eintr = 0;

static void* kernel_reader(void* arg) {
  (void)arg;
  const size_t size = 32u << 20;
  char* buf = malloc(size);
  int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
  while (!stop_busy && buf && fd >= 0) {
    if (read(fd, buf, size) != (ssize_t)size) ++short_reads;
  }
  if (fd >= 0) close(fd);
  free(buf);
  return NULL;
}

static void* short_poller(void* arg) {
  (void)arg;
  while (!stop_busy) {
    if (poll(NULL, 0, 1) < 0 && errno == EINTR) ++poll_eintr;
  }
  return NULL;
}

static int about_to_block = 0;

static void* blocker(void* arg) {
  const int i = (int)(long)arg;
  const double t0 = now_s();
  __atomic_add_fetch(&about_to_block, 1, __ATOMIC_RELEASE);
  errno = 0;
  const char* name = "?";
  const long rc = blocked_in(i, &name);
  const int err = errno;
  results[i].call = name;
  results[i].rc = rc;
  results[i].err = rc < 0 ? err : 0;
  results[i].seconds = now_s() - t0;
  return NULL;
}

static void compute_for(double seconds) {
  volatile double x = 1;
  for (const double end = now_s() + seconds; now_s() < end;) {
    for (int k = 0; k < 100000; ++k) x = x * 1.0000001 + 1e-9;
  }
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "in-mpi";
  if (strcmp(mode, "in-mpi") && strcmp(mode, "computing")) {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_usr1;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, NULL);
  sem_init(&never_posted, 0, 0);
  if (getenv("BLOCKED_CALLS_WAIT_S")) kWaitS = atoi(getenv("BLOCKED_CALLS_WAIT_S"));
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Barrier(MPI_COMM_WORLD); /* every rank has made a traced call */

  pthread_t threads[kThreads], reader, poller;
  for (long i = 0; i < kThreads; ++i) pthread_create(&threads[i], NULL, blocker, (void*)i);
  pthread_create(&reader, NULL, kernel_reader, NULL);
  pthread_create(&poller, NULL, short_poller, NULL);
  pause_thread = threads[kThreads - 1];
  const double t0 = now_s();
  /* Said once every thread is about to enter its call, by a file (mpirun
   * may forward output late): a dump from outside waits for it (on a
   * loaded machine MPI_Init alone may take seconds). */
  while (__atomic_load_n(&about_to_block, __ATOMIC_ACQUIRE) < kThreads) usleep(1000);
  if (getenv("BLOCKED_CALLS_READY_DIR")) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/ready.%d", getenv("BLOCKED_CALLS_READY_DIR"), rank);
    close(open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
  }
  if (!strcmp(mode, "in-mpi")) {
    if (rank == 1) {
      struct timespec ts = {kWaitS + 1, 0};
      while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
  } else {
    compute_for(kWaitS + 1);
  }
  /* pause ends at 9.5 s: its whole seconds are 9 whatever the threads'
   * start times (at 9 s exactly they read 8 or 9 by a coin flip). */
  while (now_s() - t0 < kWaitS + 1.5) usleep(10000);
  pthread_kill(pause_thread, SIGUSR1);
  for (int i = 0; i < kThreads; ++i) pthread_join(threads[i], NULL);
  stop_busy = 1;
  pthread_join(reader, NULL);
  pthread_join(poller, NULL);

  /* Rank by rank, in order: one block of lines each. */
  for (int r = 0; r < 2; ++r) {
    if (r == rank) {
      for (int i = 0; i < kThreads; ++i) {
        /* Its whole time, or "N s or more" once it waited its N s (pause:
         * N + 1): a call a signal cut short returns sooner; one woken late
         * on a loaded machine is no difference. */
        const int full = i == kThreads - 1 ? kWaitS + 1 : kWaitS, secs = (int)results[i].seconds;
        if (secs >= full) {
          printf("rank %d %s returned %ld errno %s after %d s or more\n", rank, results[i].call, results[i].rc,
                 results[i].err ? strerrorname_np(results[i].err) : "0", full);
        } else {
          printf("rank %d %s returned %ld errno %s after %d s\n", rank, results[i].call, results[i].rc,
                 results[i].err ? strerrorname_np(results[i].err) : "0", secs);
        }
      }
      printf("rank %d reads of 32 MiB from /dev/zero that came back short: %ld\n", rank, short_reads);
      printf("rank %d polls of 1 ms that returned EINTR: %ld\n", rank, poll_eintr);
      fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
