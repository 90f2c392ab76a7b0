/* Both ranks MPI_Ssend to each other first: a deadlock, both culprits.
 * TRUTH np=2 verdict=deadlock culprits=0,1 ops=0:MPI_Ssend,1:MPI_Ssend */
#include <mpi.h>
int main(int argc, char** argv) {
  int rank, x = 1, y;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Ssend(&x, 1, MPI_INT, 1 - rank, 0, MPI_COMM_WORLD);
  MPI_Recv(&y, 1, MPI_INT, 1 - rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Finalize();
  return 0;
}
