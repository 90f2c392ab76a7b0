"""torch.distributed jobs that hang the ways PyTorch jobs hang, on the gloo
backend (CPU; Debian's python3-torch). Nothing here knows hangtrace: the
tests run it traced (`hangtrace run`) or not at all, and compare what
hangtrace says with what each scenario does.

usage: mpirun -n 4 python3 torch_hang.py SCENARIO
  (the rank and size come from Open MPI's environment; MASTER_ADDR and
  MASTER_PORT from the test, else 127.0.0.1 and 29500)

  ok         three all-reduces and a barrier; exits 0
  skip       rank 2 joins a broadcast nobody else makes; the others go on
             to the next all-reduce (each waits for the other)
  barrier    rank 2 calls an extra barrier (the "uneven inputs" hang of DDP
             written by hand); the others wait in an all-reduce
  ddp        DistributedDataParallel with uneven inputs: rank 0 has one
             batch more, so it waits in backward's gradient all-reduce
             while the others wait in the barrier after their loop
  ddp-short  the same with one rank short: rank 3 has one batch less and
             waits in the barrier while the others wait in backward
  async      the ranks mix a posted all-reduce (async_op=True, then
             wait(): ranks 0 and 2) with the blocking call (1 and 3), one
             collective to the backend; then rank 2 sleeps for good while
             the others all-reduce (rank 0 in its wait)
  reinit     three all-reduces, destroy_process_group, a new init (the
             next port), one all-reduce; then rank 2 sleeps for good while
             the others enter a barrier
  p2p        a pipeline whose stages both receive first: ranks 0 and 1
             wait in recv from each other (2 and 3 likewise)
  abort      rank 1 aborts (SIGABRT) in step 2; the others fail or wait
  lock       rank 0 takes a file lock and enters an all-reduce; the others
             wait for the lock before theirs (a cycle through the lock)
  slow       rank 1 sleeps 60 s in step 1, then every rank finishes
  busy       healthy: every rank works 7.5 s with no call (its main thread
             waiting for a thread that computes, then for a subprocess that
             computes, then computing itself), then all-reduces and exits 0
  object     an object collective skipped: rank 2 goes on to the barrier
             while the others share a Python object (broadcast_object_list)
  loader     a DataLoader whose worker process blocks for good in rank 2's
             dataset (__getitem__): rank 2 waits for its worker, the others
             in the all-reduce of the batch rank 2 never gets
  ddp-loader the same under DistributedDataParallel: the others wait in
             backward's gradient all-reduce, which torch issues from C++
             (no traced call anywhere)
  ddp-loader-cold
             the same with no torch.distributed call of the script's own
             before it: the hang comes before any traced call has ended
Each scenario but ok prints "hung" on stderr once it is in place (rank 0;
ddp: rank 1; ddp-short: rank 3; abort: never, it ends).
"""
import fcntl
import os
import sys
import time

import torch
import torch.distributed as dist


def env(name, default):
    for k in (name, "OMPI_COMM_WORLD_" + name, "PMI_" + name, "SLURM_PROC" + name.lower()):
        if k in os.environ:
            return int(os.environ[k])
    return default


def main():
    scenario = sys.argv[1] if len(sys.argv) > 1 else "ok"
    rank = env("RANK", 0)
    size = env("SIZE", int(os.environ.get("WORLD_SIZE", 1)))
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    dist.init_process_group("gloo", rank=rank, world_size=size)
    t = torch.ones(8)

    def all_reduce():
        if scenario == "async" and rank % 2 == 0:
            dist.all_reduce(t, async_op=True).wait()
        else:
            dist.all_reduce(t)

    if not scenario.endswith("-cold"):
        for _ in range(3):
            all_reduce()

    def hung(who=0):
        if rank == who:
            print("hung", file=sys.stderr, flush=True)

    if scenario == "ok":
        dist.barrier()
    elif scenario == "skip":
        if rank == 2:
            dist.broadcast(t, src=0)
        hung()
        dist.all_reduce(t)
    elif scenario == "barrier":
        if rank == 2:
            dist.barrier()
        hung()
        dist.all_reduce(t)
    elif scenario in ("ddp", "ddp-short"):
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 8))
        if scenario == "ddp":
            batches = 3 + (1 if rank == 0 else 0)
        else:
            batches = 3 - (1 if rank == 3 else 0)
        for _ in range(batches):
            model(torch.randn(4, 8)).sum().backward()
        hung(who=1 if scenario == "ddp" else 3)  # the short ranks get here
        dist.barrier()
    elif scenario == "async":
        hung()
        while rank == 2:
            time.sleep(1)
        all_reduce()
    elif scenario == "refused":
        # Rank 1's calls torch refuses before issuing them (a root and a peer
        # no rank has) take no sequence number: the next all-reduce is #4 on
        # every rank, and rank 2, which sleeps, is the one that never came.
        if rank == 1:
            for refused in (lambda: dist.broadcast(t, src=size + 7), lambda: dist.isend(t, dst=size + 7)):
                try:
                    refused()
                except Exception as e:
                    print("refused:", type(e).__name__, file=sys.stderr, flush=True)
        hung()
        while rank == 2:
            time.sleep(1)
        dist.all_reduce(t)
    elif scenario == "reinit":
        dist.destroy_process_group()
        os.environ["MASTER_PORT"] = str(int(os.environ["MASTER_PORT"]) + 1)
        dist.init_process_group("gloo", rank=rank, world_size=size)
        dist.all_reduce(t)
        hung()
        while rank == 2:
            time.sleep(1)
        dist.barrier()
    elif scenario == "p2p":
        peer = rank ^ 1
        hung()
        dist.recv(t, src=peer)
        dist.send(t, dst=peer)
    elif scenario == "abort":
        for step in range(5):
            if rank == 1 and step == 2:
                time.sleep(0.5)
                os.abort()
            dist.all_reduce(t)
    elif scenario == "lock":
        path = os.environ.get("TORCH_HANG_LOCK", "/tmp/torch_hang.lock")
        with open(path, "a+") as f:
            if rank == 0:
                fcntl.lockf(f, fcntl.LOCK_EX)  # held across the all-reduce below
            dist.barrier()
            if rank != 0:
                fcntl.lockf(f, fcntl.LOCK_EX)  # waits for rank 0, which waits for us
            time.sleep(0.5)
            hung()
            dist.all_reduce(t)
    elif scenario == "object":
        config = [{"lr": 0.1, "step": 3} if rank == 0 else None]
        hung()
        if rank != 2:
            dist.broadcast_object_list(config, src=0)
        dist.barrier()
    elif scenario in ("loader", "ddp-loader", "ddp-loader-cold"):
        class Samples(torch.utils.data.Dataset):
            def __len__(self):
                return 8

            def __getitem__(self, i):
                if rank == 2 and i >= 4:
                    while True:  # a read that never returns (a stuck file system)
                        time.sleep(1)
                return torch.ones(8) * i

        loader = torch.utils.data.DataLoader(Samples(), batch_size=2, num_workers=1)
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 8)) if scenario != "loader" else None
        for n, batch in enumerate(loader):
            if n == 2:
                hung(who=1)  # rank 2 never gets its third batch
            if model:
                model(batch).sum().backward()
            else:
                dist.all_reduce(batch)
    elif scenario == "busy":
        import threading

        def spin(seconds):
            end, x = time.monotonic() + seconds, 0
            while time.monotonic() < end:
                x += 1

        worker = threading.Thread(target=spin, args=(2.5,))
        worker.start()
        worker.join()  # the main thread waits in a futex while its worker runs
        import subprocess
        subprocess.run([sys.executable, "-c", "import time\nend = time.monotonic() + 2.5\n"
                        "while time.monotonic() < end: pass"], check=True)  # waits in wait4
        spin(2.5)
        dist.all_reduce(t)
    elif scenario == "slow":
        for step in range(3):
            if step == 1:
                hung()  # in place: the others wait while rank 1 sleeps
                if rank == 1:
                    time.sleep(60)  # long enough for every look the test takes on a loaded machine
            dist.all_reduce(t)
    else:
        sys.exit("unknown scenario " + scenario)
    dist.destroy_process_group()
    print("done %d" % rank, flush=True)  # one write: mpirun interleaves the ranks' writes


if __name__ == "__main__":
    main()
