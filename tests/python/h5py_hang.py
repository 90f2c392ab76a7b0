"""h5py with the mpio driver (Debian's python3-h5py-mpi) hung the way a
checkpoint hangs: in step 1 rank 2 skips the collective create_dataset
that the others make, so the HDF5 metadata the ranks write collectively at
the file's flush no longer agree, and the ranks wait in MPI-IO calls below
h5py (MPI_File_set_size, MPI_File_sync, a collective write). Nothing here
knows hangtrace.

usage: mpirun -n 4 python3 h5py_hang.py FILE.h5
Prints "hung" on stderr (rank 0) once every rank is past its skip.
"""
import sys

from mpi4py import MPI
import h5py
import numpy as np


def write_checkpoint(f, comm, step):
    if comm.rank == 2 and step == 1:
        return  # a rank that skips the collective dataset creation
    data = f.create_dataset("step%d" % step, (comm.size, 16), dtype="f8")
    data[comm.rank] = np.full(16, float(step))


def main():
    comm = MPI.COMM_WORLD
    with h5py.File(sys.argv[1], "w", driver="mpio", comm=comm) as f:
        for step in range(3):
            write_checkpoint(f, comm, step)
            if step == 1 and comm.rank == 0:
                print("hung", file=sys.stderr, flush=True)
            f.flush()
    print("done", comm.rank, flush=True)


if __name__ == "__main__":
    main()
