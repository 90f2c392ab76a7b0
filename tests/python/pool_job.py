"""An mpi4py job whose ranks run a multiprocessing pool (spawn, as PyTorch's
data loaders and many pipelines do): the workers inherit each rank's
environment, make no traced call, and are ended by their pool (SIGTERM).
They must leave no trace file and no verdict of their own: the job ends
well, and is reported so.

usage: mpirun -n 2 python3 pool_job.py
"""
import multiprocessing as mp


def square(x):
    return x * x


def main():
    # Imported here: a spawned worker imports this module, and must not
    # initialize MPI (mpi4py does at import).
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    ctx = mp.get_context("spawn")
    pool = ctx.Pool(4)
    total = sum(pool.map(square, range(100)))
    pool.terminate()  # SIGTERM to every worker
    pool.join()
    assert comm.allreduce(total) == comm.Get_size() * 328350
    comm.Barrier()
    print("done", comm.Get_rank(), flush=True)


if __name__ == "__main__":
    main()
