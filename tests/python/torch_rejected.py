"""A call torch rejects, then one only the hook cannot read: the first is
the program's own error (hangtrace says nothing of it), the second goes
through untraced and is said once. Run by tests/test_mpi.cc
(Torch.OnlyACallThatWentThroughUntracedIsSaid).

  hangtrace run python3 torch_rejected.py INIT_FILE
"""
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
try:
    dist.all_reduce(torch.ones(2), group=object())  # no group: the hook cannot look it up either
except Exception as e:
    print("rejected:", type(e).__name__, flush=True)


class Unsized(torch.Tensor):
    def numel(self):
        raise ValueError("numel refused")


t = torch.ones(2).as_subclass(Unsized)
dist.all_reduce(t)
print("went through:", torch.Tensor.tolist(t), flush=True)
dist.destroy_process_group()
