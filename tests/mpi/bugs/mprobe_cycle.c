/* Both ranks MPI_Mprobe for a message the other sends only after it: a
 * deadlock of matched probes, both culprits.
 * TRUTH np=2 verdict=deadlock culprits=0,1 ops=0:MPI_Mprobe,1:MPI_Mprobe */
#include <mpi.h>
int main(int argc, char** argv) {
  int rank, x = 1;
  MPI_Message msg;
  MPI_Status st;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Mprobe(1 - rank, 0, MPI_COMM_WORLD, &msg, &st);
  MPI_Mrecv(&x, 1, MPI_INT, &msg, &st);
  MPI_Send(&x, 1, MPI_INT, 1 - rank, 0, MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
