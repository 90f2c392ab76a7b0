/* Rank 0 waits in MPI_Ssend to rank 1, which finishes without receiving.
 * TRUTH np=2 verdict=hang culprits=1 ops=0:MPI_Ssend,1:MPI_Finalize words=without~receiving */
#include <mpi.h>
int main(int argc, char** argv) {
  int rank, x = 7;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) MPI_Ssend(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
