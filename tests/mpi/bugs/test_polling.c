/* Rank 0 posts a large MPI_Isend to rank 1 and polls it with MPI_Test
 * forever; rank 1 computes forever and never receives. Rank 0 waits for
 * rank 1, which is in no call: the culprit.
 * TRUTH np=2 verdict=hang culprits=1 ops=0:MPI_Test,1:compute */
#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char** argv) {
  int rank, done = 0;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    enum { kBig = 1 << 20 };  /* above the eager limit: needs the receive */
    char* buf = calloc(kBig, 1);
    MPI_Request req;
    MPI_Isend(buf, kBig, MPI_CHAR, 1, 0, MPI_COMM_WORLD, &req);
    while (!done) {
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      usleep(1000);
    }
  } else {
    for (;;) usleep(1000);  /* "computing" */
  }
  MPI_Finalize();
  return 0;
}
