/* hpcc's RandomAccess loop when one rank stops answering: ranks 0 and 1 keep
 * a receive from any rank posted and a large send to rank 2 in flight, and
 * alternate MPI_Test on the one and on the other until the send completes;
 * rank 2 computes forever and never receives. Ranks 0 and 1 wait, by
 * polling two requests in turn, for rank 2: the culprit. Their polls must
 * not look like progress (a second snapshot sees them where the first did).
 * TRUTH np=3 verdict=hang culprits=2 ops=0:MPI_Test,1:MPI_Test,2:compute words=never~received~what */
#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char** argv) {
  enum { kBig = 1 << 20 };  /* above the eager limit: needs the receive */
  int rank;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char* buf = calloc(kBig, 1);
  char small[64];
  if (rank < 2) {
    MPI_Request recv, send;
    MPI_Irecv(small, sizeof small, MPI_CHAR, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &recv);
    MPI_Isend(buf, kBig, MPI_CHAR, 2, 1, MPI_COMM_WORLD, &send);
    for (int sent = 0; !sent;) {
      int got;
      MPI_Test(&recv, &got, MPI_STATUS_IGNORE);
      if (got) MPI_Irecv(small, sizeof small, MPI_CHAR, MPI_ANY_SOURCE, 1, MPI_COMM_WORLD, &recv);
      MPI_Test(&send, &sent, MPI_STATUS_IGNORE);
    }
    MPI_Cancel(&recv);
  } else {
    for (;;) usleep(1000);  /* "computing" */
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
