"""A healthy mpi4py job that uses every communicator call a Python program
reaches for: Split, Dup, Create (from a group), Create_group, Set_name, Free,
with collectives and point-to-point on each, object (pickle) and buffer
forms. It must run to the end traced exactly as untraced, and every call be
recorded.
"""
from array import array

from mpi4py import MPI

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()

half = world.Split(rank % 2, rank)
half.Set_name("half%d" % (rank % 2))
dup = world.Dup()
dup.Set_name("dup")
evens = world.Get_group().Incl(list(range(0, size, 2)))
created = world.Create(evens)  # MPI_COMM_NULL on odd ranks
if created != MPI.COMM_NULL:
    created.Set_name("created")
grp = world.Create_group(evens) if rank % 2 == 0 else MPI.COMM_NULL

total = 0
for i in range(20):
    total += world.allreduce(i)  # object form: pickled
    buf = array("d", [float(i)])
    half.Allreduce(MPI.IN_PLACE, [buf, MPI.DOUBLE], op=MPI.SUM)
    dup.Barrier()
    x = half.bcast(i if half.Get_rank() == 0 else None, root=0)
    assert x == i
    if created != MPI.COMM_NULL:
        created.Bcast([buf, MPI.DOUBLE], root=0)
    if grp != MPI.COMM_NULL:
        grp.Barrier()
    # A ring of sends and receives, nonblocking.
    out = array("i", [rank])
    got = array("i", [0])
    reqs = [world.Isend([out, MPI.INT], dest=(rank + 1) % size, tag=i),
            world.Irecv([got, MPI.INT], source=(rank - 1) % size, tag=i)]
    MPI.Request.Waitall(reqs)
    assert got[0] == (rank - 1) % size

for c in (grp, created, dup, half):
    if c != MPI.COMM_NULL:
        c.Free()
evens.Free()
if rank == 0:
    print("done", total, flush=True)
