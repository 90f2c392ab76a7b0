/* A rank collects two messages by polling MPI_Testsome; one sender delivers
 * and goes on to a barrier, the other computes forever and never sends.
 * Rank 0 waits, by polling, for rank 2: the culprit (rank 1 waits in the
 * barrier for both).
 * TRUTH np=3 verdict=hang culprits=2 ops=0:MPI_Testsome,1:MPI_Barrier,2:compute words=never~sent~what~rank~0~waits~for~in~MPI_Irecv */
#include <mpi.h>
#include <unistd.h>
int main(int argc, char** argv) {
  int rank, value = 7;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    int got[2];
    MPI_Request reqs[2];
    MPI_Irecv(&got[0], 1, MPI_INT, 1, 0, MPI_COMM_WORLD, &reqs[0]);
    MPI_Irecv(&got[1], 1, MPI_INT, 2, 0, MPI_COMM_WORLD, &reqs[1]);
    for (int left = 2; left > 0;) {
      int outcount, indices[2];
      MPI_Testsome(2, reqs, &outcount, indices, MPI_STATUSES_IGNORE);
      if (outcount != MPI_UNDEFINED) left -= outcount;
    }
  } else if (rank == 1) {
    MPI_Send(&value, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
  } else {
    for (;;) usleep(1000);  /* "computing" */
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
