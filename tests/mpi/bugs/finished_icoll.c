/* Ranks 0-2 enter MPI_Iallreduce on world and wait for it in MPI_Waitall;
 * rank 3 finishes without entering it. Rank 3 is the culprit (it never
 * entered what the others wait in), not in a deadlock with them.
 * TRUTH np=4 verdict=hang culprits=3 ops=0:MPI_Waitall,1:MPI_Waitall,2:MPI_Waitall,3:MPI_Finalize words=without~entering */
#include <mpi.h>
int main(int argc, char** argv) {
  int rank, x = 1, y = 0;
  MPI_Request req[1];
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank != 3) {
    MPI_Iallreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &req[0]);
    MPI_Waitall(1, req, MPI_STATUSES_IGNORE);
  }
  MPI_Finalize();
  return 0;
}
