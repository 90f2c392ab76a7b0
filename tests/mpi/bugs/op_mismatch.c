/* One rank reduces with MPI_MAX where the others use MPI_SUM: no hang, no
 * error from the library, a wrong result. The report must name the odd
 * rank and the operations.
 * TRUTH np=4 verdict=mismatch culprits=3 ops=0:exited,1:exited,2:exited,3:exited words=redop */
#include <mpi.h>
int main(int argc, char** argv) {
  int rank, in = 1, out;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Allreduce(&in, &out, 1, MPI_INT, rank == 3 ? MPI_MAX : MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
