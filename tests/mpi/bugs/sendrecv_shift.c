/* A halo exchange as GROMACS does it: each step a pair exchange (MPI_Sendrecv
 * with rank^1) then a shift along a ring (to rank+1, from rank-1). Rank 2
 * stops taking part at step 5 and computes. Rank 3 waits for it in the pair
 * exchange, rank 0 for rank 3 in the shift, rank 1 for rank 0 in the next
 * pair exchange. Ranks 0 and 1 each send to the other while receiving from
 * someone else: judged by the send's peer that reads as a cycle between
 * them; a Sendrecv waits for the rank it receives from.
 * TRUTH np=4 verdict=hang culprits=2 ops=0:MPI_Sendrecv,1:MPI_Sendrecv,2:compute,3:MPI_Sendrecv words=never~sent~what~rank~3~waits~for~in~MPI_Sendrecv */
#include <mpi.h>
#include <unistd.h>
int main(int argc, char** argv) {
  int rank, size, out = 1, in;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int step = 0;; ++step) {
    if (rank == 2 && step == 5) {
      for (;;) usleep(1000);  /* "computing" */
    }
    MPI_Sendrecv(&out, 1, MPI_INT, rank ^ 1, 0, &in, 1, MPI_INT, rank ^ 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(&out, 1, MPI_INT, (rank + 1) % size, 1, &in, 1, MPI_INT, (rank + size - 1) % size, 1,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  MPI_Finalize();
  return 0;
}
