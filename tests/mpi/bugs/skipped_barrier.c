/* Rank 2 of 4 skips a barrier and waits in the next all-reduce; the others
 * wait in the barrier.
 * Same communicator, same sequence number, different operations: the
 * verdict is a mismatch (as MPI checkers classify it), rank 2 the odd one.
 * TRUTH np=4 verdict=mismatch culprits=2 ops=0:MPI_Barrier,1:MPI_Barrier,2:MPI_Allreduce,3:MPI_Barrier */
#include <mpi.h>
int main(int argc, char** argv) {
  int rank, x = 1, y;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 2) MPI_Barrier(MPI_COMM_WORLD);
  MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
