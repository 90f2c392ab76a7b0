"""Calls torch refuses before issuing them (a root and a peer no rank has,
blocking and posted), then two that go through. The refused ones take no
sequence number: the all-reduce after them is collective #1 of the group.
Run by tests/test_mpi.cc (Torch.CallsTorchRefusesTakeNoSequenceNumber).

  hangtrace run python3 torch_refused.py INIT_FILE
"""
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
t = torch.ones(2)
for refused in (lambda: dist.broadcast(t, src=8), lambda: dist.isend(t, dst=8),
                lambda: dist.broadcast(t, src=8, async_op=True)):
    try:
        refused()
    except Exception as e:
        print("refused:", type(e).__name__, flush=True)
dist.all_reduce(t)
dist.broadcast(t, src=0)
print("done", flush=True)
dist.destroy_process_group()
