/* Both ranks MPI_Probe for a message the other sends only after its probe.
 * TRUTH np=2 verdict=deadlock culprits=0,1 ops=0:MPI_Probe,1:MPI_Probe */
#include <mpi.h>
int main(int argc, char** argv) {
  int rank, x = 1;
  MPI_Status st;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Probe(1 - rank, 0, MPI_COMM_WORLD, &st);
  MPI_Send(&x, 1, MPI_INT, 1 - rank, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
