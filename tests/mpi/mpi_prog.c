/* MPI programs for the interposer tests: an ordinary MPI program, traced
 * only through `hangtrace run` (LD_PRELOAD). Run with mpirun.
 *
 *   families  every family: collectives (blocking and nonblocking),
 *             point-to-point (blocking, nonblocking, wildcard, sendrecv,
 *             probe), completion calls, communicator management; exits 0
 *   hang      4 ranks: comm "split" (all ranks) does two collectives, then
 *             rank 1 skips the third, a Bcast with root 1, and goes on to an
 *             Allreduce on world. Rank 0 has also posted an Irecv that is
 *             never matched. Every rank dies of SIGALRM after 3 s.
 *   threads   MPI_THREAD_MULTIPLE: a second thread does point-to-point on its
 *             own comm while the main thread does collectives; rank 0 forks
 *             a child that execs /bin/true; exits 0
 *   sigstop   rank 2 stops itself (SIGSTOP) before an Allreduce the others
 *             enter; the others die of SIGALRM after 15 s (the stopped rank
 *             must be killed by whoever runs the test)
 *   loop [N]  N (5000000) 1-byte Allreduces on world, prints ns per call
 *   work [N]  N (1000000) steps of a job at work: an Allreduce, every third
 *             step a Bcast, then 200 us of computing; healthy
 *   loop-p2p [N]  N (5000000) 1-byte MPI_Send + MPI_Recv pairs, each rank
 *             to itself, prints ns per pair
 *   crash-in-call  rank 1 dies of SIGSEGV inside MPI_Allreduce (its reduction)
 *   unnamed   communicators nobody names: the halves of world by rank parity
 *             and a dup of world, a barrier on each; exits 0
 *   oom PROCS rank 1 joins the memory cgroup PROCS and eats memory until the
 *                OOM killer ends it; the others wait in a barrier
 *   stuck     five steps of an Allreduce on world and a message from rank 0
 *             to rank 1 (tag 7); in the sixth, rank 1 skips the Allreduce,
 *             which the others wait in, and waits in MPI_Recv for the
 *             message: hung until killed (rank 0 prints "stuck" once every
 *             rank is in place, to stdout)
 *   slow [S|F] rank 1 sleeps S (8) seconds before the sixth Allreduce, or
 *             until file F exists (a test's release, whatever the load), then
 *             every rank finishes; exits 0
 *   lock F    rank 0 takes a lock on file F (fcntl) and holds it through an
 *             Allreduce; the others wait for the lock before theirs: a
 *             cycle through the lock, hung until killed
 *   recycled-comm  MPI_THREAD_MULTIPLE: a second thread does an Allreduce
 *             on dup "first" of world; the main thread frees it and dups
 *             "second" (MPI often hands out the same handle again); the
 *             second thread does an Allreduce on "second"; rank 0 prints
 *             "same_handle 1" when the handles were equal
 *   heartbeat MPI_THREAD_MULTIPLE: a thread all-reduces on its own comm
 *             "heartbeat" every 0.1 s (rank 0 late to each, so that the
 *             others are inside one most of the time); the main thread makes
 *             three barriers on world a second apart, rank 3 skips the third
 *             and sleeps: hung until killed (rank 0 prints "stuck" once in
 *             place)
 *   comm-threads  MPI_THREAD_MULTIPLE: a thread per dup of world, "A"
 *             (60 all-reduces 0.1 s apart) and "B" (5 all-reduces); rank 1's
 *             thread B skips its last; the main threads join theirs: hung
 *             until killed (rank 0 prints "stuck" once its B thread is in
 *             its last all-reduce)
 *   fence     a window on world (MPI_Win_allocate) and three
 *             MPI_Win_fence epochs; rank 1 sleeps instead of the third: the
 *             others wait in the fence (Open MPI spins there, on the CPU);
 *             hung until killed (rank 0 prints "stuck")
 *   many-comms [N [keep|K]]  N (5000) times: MPI_Comm_dup of world, an
 *             Allreduce and a message from rank 0 to 1 on it, then
 *             MPI_Comm_free (none with keep; all but the first K with K);
 *             then hangs as stuck does, with a last dup's Barrier for the
 *             Allreduce
 */
#include <fcntl.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* MPI_STATUSES_IGNORE is a null pointer, which GCC 12 reads as a region of
   0 bytes passed where MPI_Waitall/MPI_Testall write statuses: a false
   -Wstringop-overflow on every such call. */
#pragma GCC diagnostic ignored "-Wstringop-overflow"

static int rank, size;

static void check(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "rank %d: check failed: %s\n", rank, what);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
}

__attribute__((noinline)) static void families(void) {
  int x = rank + 1, y = 0, buf[64];
  MPI_Request req[8];
  MPI_Status st;

  /* Blocking collectives on world. */
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  check(y == size * (size + 1) / 2, "allreduce");
  MPI_Bcast(&y, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Reduce(&x, &y, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
  MPI_Allgather(&x, 1, MPI_INT, buf, 1, MPI_INT, MPI_COMM_WORLD);
  MPI_Gather(&x, 1, MPI_INT, buf, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Scatter(buf, 1, MPI_INT, &y, 1, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Alltoall(buf, 1, MPI_INT, buf + 32, 1, MPI_INT, MPI_COMM_WORLD);
  MPI_Scan(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Exscan(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Reduce_scatter_block(buf, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);

  /* Communicators: split by parity, dup, create, create_group, idup. */
  MPI_Comm half, dup, created, grp, idup;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  MPI_Comm_set_name(half, rank % 2 ? "odd" : "even");
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_set_name(dup, "dup");
  MPI_Group world_group, first_two;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  int two[2] = {0, 1};
  MPI_Group_incl(world_group, 2, two, &first_two);
  MPI_Comm_create(MPI_COMM_WORLD, first_two, &created);
  if (rank < 2) {
    MPI_Comm_create_group(MPI_COMM_WORLD, first_two, 7, &grp);
    MPI_Comm_set_name(grp, "grp");
    MPI_Barrier(grp);
    MPI_Comm_free(&grp);
  }
  if (created != MPI_COMM_NULL) {
    MPI_Comm_set_name(created, "created");
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, created);
    MPI_Comm_free(&created);
  }
  MPI_Comm_idup(MPI_COMM_WORLD, &idup, &req[0]);
  MPI_Wait(&req[0], MPI_STATUS_IGNORE);
  MPI_Comm_set_name(idup, "idup");
  MPI_Barrier(idup);

  MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, half);
  MPI_Bcast(&y, 1, MPI_INT, 0, half);
  MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, dup);

  /* Nonblocking collectives. */
  MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[0]);
  MPI_Ibcast(buf, 4, MPI_INT, 0, dup, &req[1]);
  MPI_Ibarrier(half, &req[2]);
  MPI_Waitall(3, req, MPI_STATUSES_IGNORE);

  /* Point-to-point on a ring: blocking, synchronous, nonblocking. */
  int right = (rank + 1) % size, left = (rank + size - 1) % size;
  for (int i = 0; i < 3; ++i) {
    if (rank % 2 == 0) {
      MPI_Send(&x, 1, MPI_INT, right, 5, MPI_COMM_WORLD);
      MPI_Recv(&y, 1, MPI_INT, left, 5, MPI_COMM_WORLD, &st);
    } else {
      MPI_Recv(&y, 1, MPI_INT, left, 5, MPI_COMM_WORLD, &st);
      MPI_Send(&x, 1, MPI_INT, right, 5, MPI_COMM_WORLD);
    }
  }
  MPI_Irecv(&y, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, dup, &req[0]);  /* wildcard */
  MPI_Issend(&x, 1, MPI_INT, right, 9, dup, &req[1]);
  MPI_Irecv(buf, 1, MPI_INT, left, 11, dup, &req[2]);
  MPI_Isend(&x, 1, MPI_INT, right, 11, dup, &req[3]);
  int done = 0, index;
  while (!done) MPI_Testall(2, req + 2, &done, MPI_STATUSES_IGNORE);
  MPI_Waitany(2, req, &index, &st);
  MPI_Wait(&req[1 - index], MPI_STATUS_IGNORE);
  MPI_Sendrecv(&x, 1, MPI_INT, right, 13, &y, 1, MPI_INT, left, 13, MPI_COMM_WORLD, &st);
  check(y == left + 1, "sendrecv");
  MPI_Sendrecv_replace(&y, 1, MPI_INT, right, 14, MPI_ANY_SOURCE, 14, MPI_COMM_WORLD, &st);
  /* Persistent requests: made once, started three times. */
  MPI_Request pers[2];
  MPI_Send_init(&x, 1, MPI_INT, right, 17, MPI_COMM_WORLD, &pers[0]);
  MPI_Recv_init(&y, 1, MPI_INT, left, 17, MPI_COMM_WORLD, &pers[1]);
  for (int i = 0; i < 3; ++i) {
    MPI_Startall(2, pers);
    MPI_Waitall(2, pers, MPI_STATUSES_IGNORE);
  }
  MPI_Request_free(&pers[0]);
  MPI_Request_free(&pers[1]);
  /* Probe, then receive what it found. */
  MPI_Send(&x, 1, MPI_INT, right, 21, half == MPI_COMM_NULL ? MPI_COMM_WORLD : MPI_COMM_WORLD);
  MPI_Probe(left, 21, MPI_COMM_WORLD, &st);
  MPI_Recv(&y, 1, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Barrier(MPI_COMM_WORLD);

  MPI_Comm_free(&half);
  MPI_Comm_free(&dup);
  MPI_Comm_free(&idup);
  MPI_Group_free(&first_two);
  MPI_Group_free(&world_group);
}

__attribute__((noinline)) static void hang(void) {
  MPI_Comm split;
  int x = rank, y = 0, never = 0;
  MPI_Request pending;
  MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &split);
  MPI_Comm_set_name(split, "split");
  MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, split);
  MPI_Barrier(split);
  if (rank == 0) MPI_Irecv(&never, 1, MPI_INT, 2, 99, MPI_COMM_WORLD, &pending);
  alarm(3);
  if (rank != 1) MPI_Bcast(&y, 1, MPI_INT, 1, split); /* rank 1, the root, skips it */
  MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  fprintf(stderr, "rank %d: the hang did not happen\n", rank);
}

__attribute__((noinline)) static void sigstop(void) {
  int x = rank, y;
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 2) raise(SIGSTOP);
  else alarm(15);
  MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
}

/* Five collectives that complete, then the sixth, where rank 1 goes astray. */
/* More communicators created and freed (or kept, with "keep") than a
   trace file's table holds (4096), then a hang on the last one: rank 1
   never enters its barrier. */
static MPI_Comm g_shared_comm;
static pthread_barrier_t g_go, g_done;
static void* shared_comm_user(void* arg) {
  (void)arg;
  int x = 1, y = 0;
  for (int i = 0; i < 2; i++) {
    pthread_barrier_wait(&g_go);
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, g_shared_comm);
    pthread_barrier_wait(&g_done);
  }
  return NULL;
}

__attribute__((noinline)) static void recycled_comm(void) {
  pthread_t t;
  pthread_barrier_init(&g_go, NULL, 2);
  pthread_barrier_init(&g_done, NULL, 2);
  pthread_create(&t, NULL, shared_comm_user, NULL);
  MPI_Comm first, second;
  MPI_Comm_dup(MPI_COMM_WORLD, &first);
  MPI_Comm_set_name(first, "first");
  g_shared_comm = first;
  pthread_barrier_wait(&g_go);
  pthread_barrier_wait(&g_done);
  const MPI_Comm first_handle = first;  /* a pointer in Open MPI, an int in MPICH */
  MPI_Comm_free(&first);
  MPI_Comm_dup(MPI_COMM_WORLD, &second);
  MPI_Comm_set_name(second, "second");
  g_shared_comm = second;
  pthread_barrier_wait(&g_go);
  pthread_barrier_wait(&g_done);
  pthread_join(t, NULL);
  if (rank == 0) printf("same_handle %d\n", first_handle == second);
  MPI_Comm_free(&second);
}

/* `steps` steps of a collective on `comm` (an Allreduce on world, else a
   Barrier) then a message from rank 0 to rank 1 on world (tag 7); in the
   next, rank 1 skips the collective, which the others wait in, and waits
   for the message. The steps before show the order (the collective, then
   the message): rank 1 strayed, not rank 0. */
static void StepsThenSkip(MPI_Comm comm, int steps) {
  int x = 1, y = 0;
  for (int i = 0; i <= steps; i++) {
    if (i == steps && rank == 0) {
      printf("stuck\n");
      fflush(stdout);
    }
    if (i < steps || rank != 1) {
      if (comm == MPI_COMM_WORLD) MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, comm);
      else MPI_Barrier(comm);
    }
    if (rank == 0 && i < steps) MPI_Send(&x, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
    if (rank == 1) MPI_Recv(&y, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  fprintf(stderr, "rank %d: the hang did not happen\n", rank);
}

/* keep: how many of the first communicators are kept (the rest are freed) */
__attribute__((noinline)) static void many_comms(int n, int keep_first) {
  int x = 1, y = 0;
  for (int i = 0; i < n; i++) {
    const int keep = i < keep_first;
    MPI_Comm c;
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, c);
    /* A message on each: its stream on the new communicator starts at 1,
       whichever slot (and cached stream) an old one had. */
    if (rank == 0) MPI_Send(&x, 1, MPI_INT, 1, 3, c);
    if (rank == 1) MPI_Recv(&y, 1, MPI_INT, 0, 3, c, MPI_STATUS_IGNORE);
    if (!keep) MPI_Comm_free(&c);
  }
  MPI_Comm last;
  MPI_Comm_dup(MPI_COMM_WORLD, &last);
  MPI_Comm_set_name(last, "last");
  StepsThenSkip(last, 2);
}

__attribute__((noinline)) static void stuck(void) { StepsThenSkip(MPI_COMM_WORLD, 5); }

__attribute__((noinline)) static void slow(const char* arg) {
  int x = 1, y = 0;
  for (int i = 0; i < 5; i++) MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) {
    printf("slow\n");
    fflush(stdout);
  }
  if (rank == 1 && arg[0] == '/') {
    while (access(arg, F_OK) != 0) usleep(100 * 1000);
  } else if (rank == 1) {
    sleep((unsigned)atoi(arg));
  }
  MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
}

__attribute__((noinline)) static void lock(const char* path) {
  int x = 1, y = 0;
  int fd = open(path, O_RDWR | O_CREAT, 0600);
  check(fd >= 0, "open the lock file");
  struct flock l = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
  if (rank == 0) check(fcntl(fd, F_SETLKW, &l) == 0, "lock");  /* held through the Allreduce */
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != 0) check(fcntl(fd, F_SETLKW, &l) == 0, "lock");  /* waits for rank 0, which waits for us */
  if (rank == 0) {
    usleep(300 * 1000);
    printf("lock\n");
    fflush(stdout);
  }
  MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  close(fd);
}

static MPI_Comm thread_comm;
static void* p2p_thread(void* arg) {
  (void)arg;
  int right = (rank + 1) % size, left = (rank + size - 1) % size, x = rank, y;
  for (int i = 0; i < 20; ++i) {
    MPI_Sendrecv(&x, 1, MPI_INT, right, 1, &y, 1, MPI_INT, left, 1, thread_comm, MPI_STATUS_IGNORE);
  }
  return NULL;
}

__attribute__((noinline)) static void threads(void) {
  pthread_t th;
  MPI_Comm_dup(MPI_COMM_WORLD, &thread_comm);
  MPI_Comm_set_name(thread_comm, "thread");
  pthread_create(&th, NULL, p2p_thread, NULL);
  int x = rank, y;
  for (int i = 0; i < 20; ++i) MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  pthread_join(th, NULL);
  if (rank == 0) {
    pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/true", "true", (char*)NULL);
      _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork+exec child");
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm_free(&thread_comm);
}

__attribute__((noinline)) static void loop(int n) {
  char a = 1, b;
  for (int i = 0; i < 1000; ++i) MPI_Allreduce(&a, &b, 1, MPI_CHAR, MPI_MAX, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < n; ++i) MPI_Allreduce(&a, &b, 1, MPI_CHAR, MPI_MAX, MPI_COMM_WORLD);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n;
  if (rank == 0) printf("ns_per_allreduce %.1f\n", ns);
}

/* A job at work: all-reduces and broadcasts with a little computing
 * between them (200 us), for n steps. Healthy: at every instant some ranks
 * are in a call and one is behind them. */
__attribute__((noinline)) static void work(int n) {
  double in[64] = {0}, out[64];
  for (int i = 0; i < n; ++i) {
    MPI_Allreduce(in, out, 64, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (i % 3 == 0) MPI_Bcast(out, 64, MPI_DOUBLE, i % size, MPI_COMM_WORLD);
    usleep(200);
  }
}

__attribute__((noinline)) static void loop_p2p(int n) {
  char a = 1, b;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < n; ++i) {
    MPI_Send(&a, 1, MPI_CHAR, rank, 5, MPI_COMM_WORLD);
    MPI_Recv(&b, 1, MPI_CHAR, rank, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n;
  if (rank == 0) printf("ns_per_send_recv %.1f\n", ns);
}

/* A reduction that crashes on rank 1: a rank dying of SIGSEGV inside
 * MPI_Allreduce, where the others wait for its part. */
static void crashing_sum(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  if (rank == 1) *(volatile int*)0 = 1;
  for (int i = 0; i < *len; ++i) ((int*)inout)[i] += ((int*)in)[i];
}

__attribute__((noinline)) static void crash_in_call(void) {
  MPI_Op op;
  MPI_Op_create(crashing_sum, 1, &op);
  /* Large: a ring all-reduce in segments, so the others wait for rank 1's
   * next segment inside the call instead of finishing without it. */
  const int n = 1 << 20;
  int* x = calloc(n, sizeof(int));
  int* y = calloc(n, sizeof(int));
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Allreduce(x, y, n, MPI_INT, op, MPI_COMM_WORLD);
  MPI_Op_free(&op);
  free(x);
  free(y);
}

/* Rank 1 joins the memory cgroup `procs` (a cgroup.procs file) and takes
 * memory until the kernel's OOM killer ends it; the others wait for it in
 * a barrier. */
__attribute__((noinline)) static void oom(const char* procs) {
  if (rank == 1) {
    FILE* f = fopen(procs, "w");
    check(f != NULL, "cgroup.procs");
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
    for (;;) {
      char* p = malloc(8 << 20);
      if (p) memset(p, 1, 8 << 20);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

static MPI_Comm heartbeat_comm;
static void* heartbeat_thread(void* arg) {
  (void)arg;
  for (;;) {
    int x = 1, y = 0;
    if (rank == 0) usleep(90000);
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, heartbeat_comm);
    usleep(10000);
  }
  return NULL;
}

static void heartbeat(void) {
  pthread_t th;
  MPI_Comm_dup(MPI_COMM_WORLD, &heartbeat_comm);
  MPI_Comm_set_name(heartbeat_comm, "heartbeat");
  pthread_create(&th, NULL, heartbeat_thread, NULL);
  for (int step = 0; step < 3; ++step) {
    sleep(1);
    if (step == 2 && rank == 3) continue;
    if (step == 2 && rank == 0) {
      printf("stuck\n");
      fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  for (;;) sleep(1);
}

static MPI_Comm thread_comms[2];
static void* comm_thread(void* arg) {
  const int which = (int)(long)arg;  // 0: A, 1: B
  for (int k = 0; k < (which == 0 ? 60 : 5); ++k) {
    int x = 1, y = 0;
    if (which == 0) usleep(100000);
    if (which == 1 && k == 4) {
      if (rank == 1) break;  // rank 1's thread B skips its last all-reduce
      if (rank == 0) {
        printf("stuck\n");
        fflush(stdout);
      }
    }
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, thread_comms[which]);
  }
  return NULL;
}

static void comm_threads(void) {
  pthread_t th[2];
  MPI_Comm_dup(MPI_COMM_WORLD, &thread_comms[0]);
  MPI_Comm_dup(MPI_COMM_WORLD, &thread_comms[1]);
  MPI_Comm_set_name(thread_comms[0], "A");
  MPI_Comm_set_name(thread_comms[1], "B");
  for (long i = 0; i < 2; ++i) pthread_create(&th[i], NULL, comm_thread, (void*)i);
  for (int i = 0; i < 2; ++i) pthread_join(th[i], NULL);
  MPI_Barrier(MPI_COMM_WORLD);
}

static void fence(void) {
  MPI_Win win;
  int* mem = NULL;
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
  for (int step = 0; step < 3; ++step) {
    if (step == 2 && rank == 1) {
      for (;;) sleep(1);
    }
    if (step == 2 && rank == 0) {
      printf("stuck\n");
      fflush(stdout);
    }
    MPI_Win_fence(0, win);
  }
  MPI_Win_free(&win);
}

static void unnamed(void) {
  MPI_Comm half, dup;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Barrier(half);
  MPI_Barrier(dup);
  MPI_Comm_free(&half);
  MPI_Comm_free(&dup);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "families";
  int provided;
  const int multiple = !strcmp(mode, "threads") || !strcmp(mode, "recycled-comm") || !strcmp(mode, "heartbeat") ||
                       !strcmp(mode, "comm-threads");
  MPI_Init_thread(&argc, &argv, multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (!strcmp(mode, "families")) families();
  else if (!strcmp(mode, "hang")) hang();
  else if (!strcmp(mode, "sigstop")) sigstop();
  else if (!strcmp(mode, "threads")) {
    check(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE");
    threads();
  } else if (!strcmp(mode, "loop")) loop(argc > 2 ? atoi(argv[2]) : 5000000);
  else if (!strcmp(mode, "work")) work(argc > 2 ? atoi(argv[2]) : 1000000);
  else if (!strcmp(mode, "loop-p2p")) loop_p2p(argc > 2 ? atoi(argv[2]) : 5000000);
  else if (!strcmp(mode, "oom")) oom(argc > 2 ? argv[2] : "");
  else if (!strcmp(mode, "crash-in-call")) crash_in_call();
  else if (!strcmp(mode, "unnamed")) unnamed();
  else if (!strcmp(mode, "stuck")) stuck();
  else if (!strcmp(mode, "fence")) fence();
  else if (!strcmp(mode, "comm-threads")) {
    check(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE");
    comm_threads();
  }
  else if (!strcmp(mode, "heartbeat")) {
    check(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE");
    heartbeat();
  }
  else if (!strcmp(mode, "many-comms")) {
    const int n = argc > 2 ? atoi(argv[2]) : 5000;
    many_comms(n, argc <= 3 ? 0 : !strcmp(argv[3], "keep") ? n : atoi(argv[3]));
  } else if (!strcmp(mode, "recycled-comm")) {
    check(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE");
    recycled_comm();
  } else if (!strcmp(mode, "slow")) slow(argc > 2 ? argv[2] : "8");
  else if (!strcmp(mode, "lock")) lock(argc > 2 ? argv[2] : "/tmp/hangtrace-lock-test");
  else check(0, "unknown mode");
  MPI_Finalize();
  return 0;
}
