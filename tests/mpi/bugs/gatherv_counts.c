/* MPI_Gatherv and MPI_Scatterv where every rank's count differs by design,
 * then a clean end: no hang and no mismatch.
 * TRUTH np=4 verdict=no-hang culprits= ops=0:exited,1:exited,2:exited,3:exited */
#include <mpi.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  int rank, size;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int* counts = malloc(sizeof(int) * size);
  int* displs = malloc(sizeof(int) * size);
  int total = 0;
  for (int i = 0; i < size; ++i) counts[i] = 10 + i, displs[i] = total, total += counts[i];
  int* all = malloc(sizeof(int) * total);
  int* mine = calloc(counts[rank], sizeof(int));
  for (int k = 0; k < 20; ++k) {
    MPI_Gatherv(mine, counts[rank], MPI_INT, all, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Scatterv(all, counts, displs, MPI_INT, mine, counts[rank], MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Allgatherv(mine, counts[rank], MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD);
  }
  MPI_Finalize();
  return 0;
}
