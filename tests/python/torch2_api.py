"""torch 2.x's API through hangtrace's hook, on the FAKE torch of
tests/fakes/torch2 (Debian 12 ships torch 1.13): one process as rank 2 of 4
makes calls only 2.x has (group_src/group_dst, a described group). The
test reads what the trace holds.

  PYTHONPATH=tests/fakes/torch2 hangtrace run python3 torch2_api.py
"""
import torch
import torch.distributed as dist

dist.init_process_group("fake", rank=2, world_size=4)
t = torch.Tensor(16, torch.bfloat16)
dist.all_reduce(t, op=dist.ReduceOp.MAX)                 # #1 on default_pg, max, bf16 x16
pair = dist.new_group([1, 2], group_desc="tp")             # rank 2 is the pair's rank 1
dist.new_group([0, 3])                                     # not a member
dist.broadcast(t, group=pair, group_src=0)                 # #1 on tp, root: the pair's rank 0
dist.send(t, group=pair, group_dst=0, tag=3)               # to the pair's rank 0, tag 3
dist.recv(t, src=1, group=pair)                            # global rank 1: the pair's rank 0
dist.recv(t)                                               # any source: the fake says 3
work = dist.all_reduce(t, async_op=True)                   # #2 on default_pg, posted
work.wait()
req = dist.irecv(t, group=pair, group_src=0)
while not req.is_completed():
    pass
torch.compiler.compiling = True                            # as while torch.compile traces:
dist.all_reduce(t)                                         # not recorded (no graph break)
torch.compiler.compiling = False
dist.barrier()                                             # #3 on default_pg
# What introspects torch's functions finds functions, as untraced.
import inspect, pickle, weakref  # noqa: E401,E402
wrapped = dist.all_reduce
assert inspect.isfunction(wrapped), repr(wrapped)
assert inspect.signature(wrapped) == inspect.signature(wrapped.__wrapped__)
assert weakref.ref(wrapped)() is wrapped
assert pickle.loads(pickle.dumps(wrapped)) is wrapped
print("ok", flush=True)
