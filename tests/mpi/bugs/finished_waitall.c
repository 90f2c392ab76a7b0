/* Rank 1 waits in MPI_Waitall for two receives from rank 0 (tags 0 and 1);
 * rank 0 sends only tag 0 and finishes, as does rank 2. The finished ranks
 * are one class: they must not close a cycle through rank 1, which rank 0
 * holds up. Rank 0 is the culprit.
 * TRUTH np=3 verdict=hang culprits=0 ops=0:MPI_Finalize,1:MPI_Waitall,2:MPI_Finalize words=without~sending */
#include <mpi.h>
int main(int argc, char** argv) {
  int rank, x = 1, y = 0, z = 0;
  MPI_Request req[2];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) MPI_Send(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
  if (rank == 1) {
    MPI_Irecv(&y, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, &req[0]);
    MPI_Irecv(&z, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &req[1]);
    MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
  }
  MPI_Finalize();
  return 0;
}
