// Runs an MPI program built as a shared library (mpi_prog.c with main renamed
// mpi_prog_main), loaded with dlopen(RTLD_LOCAL) after start-up: libmpi then
// arrives late and outside the global scope, as when mpi4py or torch load it.
//
//   mpi_late LIBRARY MODE...
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: mpi_late LIBRARY [MODE...]\n");
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "mpi_late: %s\n", dlerror());
    return 2;
  }
  int (*entry)(int, char**) = (int (*)(int, char**))dlsym(lib, "mpi_prog_main");
  if (!entry) {
    fprintf(stderr, "mpi_late: %s has no mpi_prog_main\n", argv[1]);
    return 2;
  }
  return entry(argc - 1, argv + 1);
}
