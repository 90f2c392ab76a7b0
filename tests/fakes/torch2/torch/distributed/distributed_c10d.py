"""A FAKE torch.distributed.distributed_c10d with torch 2.x's signatures
(group_src/group_dst, ProcessGroup.group_name and group_desc, Work), for
one process playing rank 2 of a world of 4: every call completes at once.
Only what hangtrace's hook touches is here."""
import itertools

__all__ = ["all_reduce", "broadcast", "send", "recv", "isend", "irecv", "barrier", "new_group",
           "ReduceOp", "GroupMember", "Work", "init_process_group", "destroy_process_group", "get_rank"]


class ReduceOp(object):
    class RedOpType(object):
        def __init__(self, name):
            self.name = name

    SUM = RedOpType("SUM")
    MAX = RedOpType("MAX")


class Work(object):
    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def source_rank(self):
        return 3


class ProcessGroup(object):
    _count = itertools.count()

    def __init__(self, ranks, desc="undefined"):
        self.ranks = ranks
        self.group_name = str(next(ProcessGroup._count))
        self.group_desc = desc


class GroupMember(object):
    NON_GROUP_MEMBER = object()
    WORLD = None


_default = None


def init_process_group(backend=None, rank=2, world_size=4):
    global _default
    _default = ProcessGroup(list(range(world_size)), "default_pg")
    GroupMember.WORLD = _default


def _get_default_group():
    if _default is None:
        raise RuntimeError("Default process group has not been initialized")
    return _default


def get_rank(group=None):
    return 2


def get_process_group_ranks(group):
    return list(group.ranks)


def new_group(ranks=None, group_desc=None):
    if 2 not in ranks:
        return GroupMember.NON_GROUP_MEMBER
    return ProcessGroup(sorted(ranks), group_desc or "undefined")


def destroy_process_group(group=None):
    pass


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    work = Work()
    return work if async_op else work.wait() and None


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    return Work() if async_op else None


def barrier(group=None, async_op=False, device_ids=None):
    return Work() if async_op else None


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    return None


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    return 3 if src is None and group_src is None else src


def isend(tensor, dst=None, group=None, tag=0, group_dst=None):
    return Work()


def irecv(tensor, src=None, group=None, tag=0, group_src=None):
    return Work()
