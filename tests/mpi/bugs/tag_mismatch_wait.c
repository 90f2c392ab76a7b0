/* tag_mismatch with a nonblocking receive: rank 0 sends tag 0 to rank 1
 * (small: it completes eagerly) and goes on to a barrier; rank 1 posts
 * MPI_Irecv for tag 1 from rank 0 and waits for it in MPI_Wait. The two
 * disagree on the tag: both are named, as with a blocking receive.
 * TRUTH np=2 verdict=hang culprits=0,1 ops=0:MPI_Barrier,1:MPI_Wait words=tag~mismatch */
#include <mpi.h>
int main(int argc, char** argv) {
  int rank, x = 3;
  MPI_Request req;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    MPI_Send(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
  } else {
    MPI_Irecv(&x, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}
