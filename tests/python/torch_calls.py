"""Every family of torch.distributed calls, on gloo, once or twice each,
correctly: the test runs it traced and checks that the ranks' traces agree
(each process group's collectives in the same order with the same
arguments, each send with its receive, each posted call ended). Knows
nothing of hangtrace.

usage: mpirun -n 4 python3 torch_calls.py
  (rank and size from Open MPI's environment; MASTER_ADDR/MASTER_PORT from
  the test). With TORCH_CALLS_SITE set, checks that the sitecustomize on
  PYTHONPATH ran (it sets builtins.torch_calls_site).
"""
import builtins
import gc
import os
import sys
import time
import weakref

import torch
import torch.distributed as dist


def main():
    if os.environ.get("TORCH_CALLS_SITE") and not getattr(builtins, "torch_calls_site", False):
        sys.exit("the program's own sitecustomize did not run")
    rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", 0)))
    size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("WORLD_SIZE", 1)))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    dist.init_process_group("gloo", rank=rank, world_size=size)
    assert size >= 4 and size % 2 == 0
    t = torch.full((8,), float(rank))

    # Collectives on the default group.
    dist.all_reduce(t)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    dist.broadcast(t, src=1)
    dist.reduce(t, dst=2)
    out = [torch.zeros(8) for _ in range(size)]
    dist.all_gather(out, t)
    dist.gather(t, out if rank == 0 else None, dst=0)
    dist.scatter(t, out if rank == 3 else None, src=3)
    dist.all_to_all_single(torch.zeros(size * 2), torch.ones(size * 2))
    dist.barrier()
    dist.monitored_barrier()
    # Objects: each is one call, whatever it issues inside.
    objs = [None] * size
    dist.all_gather_object(objs, {"rank": rank})
    lst = [rank, "x"] if rank == 0 else [None, None]
    dist.broadcast_object_list(lst, src=0)
    dist.gather_object(rank, objs if rank == 1 else None, dst=1)
    got = [None]
    dist.scatter_object_list(got, list(range(size)) if rank == 2 else None, src=2)
    # async_op: posted, ended by its wait.
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    work = dist.broadcast(t, src=0, async_op=True)
    while not work.is_completed():
        pass
    # A future, as DDP's comm hooks keep (the work itself dropped): the
    # tracer must not keep the work, and its tensors, alive.
    work = dist.all_reduce(t, async_op=True)
    future = work.get_future()
    dropped = weakref.ref(work)
    del work
    future.wait()
    # gloo's worker thread lets go of the work a moment after it completes
    # the future: a leak keeps it for good, so give that moment.
    for _ in range(200):
        gc.collect()
        if dropped() is None:
            break
        time.sleep(0.01)
    if dropped() is not None:
        sys.exit("a dropped work is kept alive")

    # Groups: halves, and one with every rank (named apart from the default).
    evens = dist.new_group(list(range(0, size, 2)))
    odds = dist.new_group(list(range(1, size, 2)))
    everyone = dist.new_group(list(range(size)))
    mine = evens if rank % 2 == 0 else odds
    dist.all_reduce(t, group=mine)
    dist.broadcast(t, src=rank % 2, group=mine)  # the first rank of each half
    dist.all_reduce(t, group=everyone)

    # Point to point: a ring (evens send first), tagged; posted; any source.
    right, left = (rank + 1) % size, (rank - 1) % size
    buf = torch.zeros(8)
    if rank % 2 == 0:
        dist.send(t, dst=right, tag=5)
        dist.recv(buf, src=left, tag=5)
    else:
        dist.recv(buf, src=left, tag=5)
        dist.send(t, dst=right, tag=5)
    reqs = [dist.isend(t, dst=right), dist.irecv(buf, src=left)]
    for r in reqs:
        r.wait()
    if rank == 0:  # a tag of their own: a later send to rank 0 may come first
        senders = sorted(dist.recv(buf, tag=7) for _ in range(size - 1))
        assert senders == list(range(1, size)), senders
    else:
        dist.send(t, dst=0, tag=7)
    ops = [dist.P2POp(dist.isend, t, right), dist.P2POp(dist.irecv, buf, left)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    # Within a group: its ranks are the group's (global rank 2 is rank 1 of the evens).
    if mine is evens and rank in (0, 2):
        if rank == 0:
            dist.send(t, dst=2, group=evens)
        else:
            dist.recv(buf, src=0, group=evens)
    dist.barrier()
    dist.destroy_process_group()
    print("ok", rank, flush=True)


if __name__ == "__main__":
    main()
