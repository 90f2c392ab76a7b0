/* Mixed collective and point-to-point waits: world is split in halves
 * {0,2} and {1,3}; rank 3 skips the barrier on its half and goes on to a
 * receive from rank 1, which waits in that barrier (a cycle through a
 * collective and a point-to-point edge). Ranks 0 and 2 finish their half's
 * barrier and wait in the world's. Whether rank 3 skipped the barrier or
 * rank 1 was to send before it, nothing in the trace says (the two never
 * exchanged before): both are named, each with its side.
 * TRUTH np=4 verdict=hang culprits=1,3 ops=0:MPI_Barrier,1:MPI_Barrier,2:MPI_Barrier,3:MPI_Recv words=which~strayed */
#include <mpi.h>
int main(int argc, char** argv) {
  int rank, x = 0;
  MPI_Comm half;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  if (rank != 3) MPI_Barrier(half);
  if (rank == 3) MPI_Recv(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (rank == 1) MPI_Send(&x, 1, MPI_INT, 3, 0, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
