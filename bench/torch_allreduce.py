"""A loop of dist.all_reduce on a 1-element tensor (gloo, 2 ranks under
mpirun): prints ns per call. bench/bench_torch.sh runs it untraced and
traced, interleaved."""
import os
import sys
import time

import torch
import torch.distributed as dist

calls = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
dist.init_process_group("gloo", rank=rank, world_size=int(os.environ["OMPI_COMM_WORLD_SIZE"]))
t = torch.ones(1)
for _ in range(1000):  # warm up
    dist.all_reduce(t)
dist.barrier()
start = time.perf_counter_ns()
for _ in range(calls):
    dist.all_reduce(t)
elapsed = time.perf_counter_ns() - start
dist.barrier()
if rank == 0:
    print("ns_per_allreduce %.1f" % (elapsed / calls), flush=True)
dist.destroy_process_group()
