/* A serial program on an MPI stub (mpi_stub.c), as a MUMPS or PETSc build
 * without MPI is: under hangtrace's preload it must run as untraced.
 *
 *   stub_prog linked   calls the stub's functions it was linked with
 *   stub_prog dlopen   then also finds them by dlsym(RTLD_DEFAULT), after
 *                      dlopen'ing the stub again, as a plugin loader would
 *   stub_prog dlsym-first
 *                      finds MPI_Barrier by dlsym and calls it before any
 *                      linked call: before hangtrace's first MPI lookup
 * Prints what each call gave; exits 0. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int MPI_Init(int*, char***);
int MPI_Initialized(int*);
int MPI_Comm_rank(int, int*);
int MPI_Comm_size(int, int*);
int MPI_Allreduce(const void*, void*, int, int, int, int);
int MPI_Barrier(int);
int MPI_Finalize(void);

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "linked";
  int flag = -1, rank = -1, size = -1, in[3] = {7, 8, 9}, out[3] = {0, 0, 0};
  if (!strcmp(mode, "dlsym-first")) {
    int (*barrier)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "MPI_Barrier");
    printf("MPI_Barrier by dlsym first: %s\n", barrier ? "found" : "absent");
    if (barrier) printf("barrier by dlsym %d\n", barrier(0));
  }
  const int init = MPI_Init(&argc, &argv);
  printf("init %d\n", init);
  const int initialized = MPI_Initialized(&flag);
  printf("initialized %d flag %d\n", initialized, flag);
  const int got_rank = MPI_Comm_rank(0, &rank), got_size = MPI_Comm_size(0, &size);
  printf("rank %d %d size %d %d\n", got_rank, rank, got_size, size);
  const int reduced = MPI_Allreduce(in, out, 3, 0, 0, 0);
  printf("allreduce %d -> %d %d %d\n", reduced, out[0], out[1], out[2]);
  printf("barrier %d\n", MPI_Barrier(0));
  if (!strcmp(mode, "dlopen")) {
    void* h = dlopen("libmpi_stub.so", RTLD_NOW | RTLD_GLOBAL);
    int (*barrier)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "MPI_Barrier");
    int (*initialized_fn)(int*) = (int (*)(int*))dlsym(RTLD_DEFAULT, "MPI_Initialized");
    printf("dlopen %s, MPI_Barrier %s\n", h ? "ok" : "failed", barrier ? "found" : "absent");
    if (barrier) printf("barrier by dlsym %d\n", barrier(0));
    if (initialized_fn) {
      flag = -1;
      const int again = initialized_fn(&flag);
      printf("initialized by dlsym %d flag %d\n", again, flag);
    }
  }
  printf("finalize %d\n", MPI_Finalize());
  return 0;
}
