/* hpcc's RandomAccess pattern: rank 0 posts large MPI_Isends to ranks 1 and
 * 2 and spins in MPI_Testany until both complete; rank 1 receives and goes
 * on to a barrier; rank 2 computes forever and never receives. Rank 0 waits,
 * by polling, for rank 2: the culprit.
 * TRUTH np=3 verdict=hang culprits=2 ops=0:MPI_Testany,1:MPI_Barrier,2:compute */
#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char** argv) {
  enum { kBig = 1 << 20 };  /* above the eager limit: needs the receive */
  int rank;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char* buf = calloc(kBig, 1);
  if (rank == 0) {
    MPI_Request reqs[2];
    MPI_Isend(buf, kBig, MPI_CHAR, 1, 0, MPI_COMM_WORLD, &reqs[0]);
    MPI_Isend(buf, kBig, MPI_CHAR, 2, 0, MPI_COMM_WORLD, &reqs[1]);
    for (int left = 2; left > 0;) {
      int index, flag;
      MPI_Testany(2, reqs, &index, &flag, MPI_STATUS_IGNORE);
      if (flag && index != MPI_UNDEFINED) --left;
    }
  } else if (rank == 1) {
    MPI_Recv(buf, kBig, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  } else {
    for (;;) usleep(1000);  /* "computing" */
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
