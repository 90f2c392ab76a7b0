/* One rank reduces MPI_FLOAT where the others reduce MPI_INT (same size, so
 * Open MPI neither hangs nor complains: the sums are garbage). Then a clean
 * end. The report must name the odd rank and the datatypes.
 * TRUTH np=4 verdict=mismatch culprits=2 ops=0:exited,1:exited,2:exited,3:exited words=datatype */
#include <mpi.h>
int main(int argc, char** argv) {
  int rank, in[4] = {1, 2, 3, 4}, out[4];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Allreduce(in, out, 4, rank == 2 ? MPI_FLOAT : MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
