/* The same send-first exchange with a message above the eager limit: each
 * MPI_Send waits for the matching receive (rendezvous), so both ranks wait
 * in MPI_Send for each other: a deadlock, both culprits.
 * TRUTH np=2 verdict=deadlock culprits=0,1 ops=0:MPI_Send,1:MPI_Send */
#include <mpi.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  enum { kBig = 1 << 22 };
  int rank;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char* out = calloc(kBig, 1);
  char* in = calloc(kBig, 1);
  MPI_Send(out, kBig, MPI_CHAR, 1 - rank, 0, MPI_COMM_WORLD);
  MPI_Recv(in, kBig, MPI_CHAR, 1 - rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Finalize();
  return 0;
}
