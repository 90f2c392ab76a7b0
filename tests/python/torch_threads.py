"""Two threads of one rank all-reduce on two groups, each its own tensor:
thread A a float32 tensor subclass whose numel() runs Python code (so the
interpreter may switch to thread B in the middle of A's call being
recorded), thread B int64. Each record must carry its own call's count and
dtype. Run by tests/test_mpi.cc (Torch.ThreadsSwitchingInsideTheHookKeepTheirOwnRecords).

  hangtrace run python3 torch_threads.py INIT_FILE [CALLS]
"""
import sys
import threading
import time

import torch
import torch.distributed as dist

sys.setswitchinterval(1e-6)  # switch threads as often as the interpreter can
dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
calls = int(sys.argv[2]) if len(sys.argv) > 2 else 2000


class Yielding(torch.Tensor):
    def numel(self):
        time.sleep(0)  # lets the other thread run
        return super().numel()


group_a, group_b = dist.new_group([0]), dist.new_group([0])


def run(tensor, group):
    for _ in range(calls):
        dist.all_reduce(tensor, group=group)


threads = [threading.Thread(target=run, args=(torch.ones(3).as_subclass(Yielding), group_a)),
           threading.Thread(target=run, args=(torch.ones(7, dtype=torch.int64), group_b))]
for t in threads:
    t.start()
for t in threads:
    t.join()
# A gloo worker drops its reference to a call's tensors a moment after the
# call returns. Were the subclass tensor's last reference dropped there
# while the interpreter finalizes, torch would abort ("terminate called
# without an active exception": a thread taking the GIL then exits). The
# groups are ended first, which joins their workers: that race is torch's,
# seen here untraced as often as traced once numel() is called per call.
dist.destroy_process_group()
del group_a, group_b
print("done", flush=True)
