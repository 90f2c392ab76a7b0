"""A loop of dist.all_reduce on a 1-element tensor (gloo, 2 ranks under
mpirun): prints ns per call. bench/bench_torch.sh runs it untraced and
traced, interleaved.

  [WARMUP=35000] torch_allreduce.py [CALLS]

The warm-up (35,000 calls by default) writes the traced thread's lane of
the trace file once around (65,536 records, two per call): the first
write of each of its pages is a page fault, a cost once per thread and
not per call, which the measured loop then does not count."""
import os
import sys
import time

import torch
import torch.distributed as dist

calls = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
warmup = int(os.environ.get("WARMUP", 35000))
rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
dist.init_process_group("gloo", rank=rank, world_size=int(os.environ["OMPI_COMM_WORLD_SIZE"]))
t = torch.ones(1)
for _ in range(warmup):
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
