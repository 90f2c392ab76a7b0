"""The BigScience 176B hang, written the way Megatron-DeepSpeed writes it,
in mpi4py: ranks form pipelines of 2 stages (pp groups) and data-parallel
groups (dp). Each step ends with the loss averaged over dp on the last stage
and broadcast from there to its pipeline (_aggregate_total_loss), then an
all-reduce of the done flag over the world.

  python3 seed_hang.py [--hang-rank R] [--hang-step S] [--steps N] [--objects]

With --hang-rank, that rank (a last-stage rank: odd) skips its loss
broadcast at step S and goes on to the world all-reduce: its pipeline
partner waits in the broadcast forever, everyone else in the all-reduce.
Without it the job trains to the end and exits 0. Lines marked "# at: NAME"
are where the ranks wait; the test reads them from this file.

With --objects the same job is written with mpi4py's lowercase object API
(comm.send/recv, comm.allreduce, comm.bcast of Python objects), which
mpi4py builds from point-to-point calls and broadcasts, partly on a
duplicate of the communicator of its own.
"""
import argparse
from array import array

from mpi4py import MPI

STAGES = 2


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--hang-rank", type=int, default=-1)
    p.add_argument("--hang-step", type=int, default=2)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--objects", action="store_true")
    return p.parse_args()


class Groups:
    def __init__(self, world):
        rank = world.Get_rank()
        self.world = world
        self.stage = rank % STAGES
        self.pp = world.Split(rank // STAGES, rank)  # my pipeline: stages 0..STAGES-1
        self.pp.Set_name("pp%d" % (rank // STAGES))
        self.dp = world.Split(self.stage, rank)  # same stage of every pipeline
        self.dp.Set_name("dp%d" % self.stage)
        self.last_stage = self.stage == STAGES - 1


def forward_backward(groups, step, args):
    # The pipeline's activations and gradients, as blocking point-to-point.
    if args.objects:
        if groups.stage == 0:
            groups.pp.send(float(step), dest=1, tag=step)
            groups.pp.recv(source=1, tag=step)
        else:
            groups.pp.send(groups.pp.recv(source=0, tag=step), dest=0, tag=step)
        return 1.0 / (1.0 + step)
    act = array("d", [float(step)])
    if groups.stage == 0:
        groups.pp.Send([act, MPI.DOUBLE], dest=1, tag=step)
        groups.pp.Recv([act, MPI.DOUBLE], source=1, tag=step)
    else:
        groups.pp.Recv([act, MPI.DOUBLE], source=0, tag=step)
        groups.pp.Send([act, MPI.DOUBLE], dest=0, tag=step)
    return 1.0 / (1.0 + step)


def _aggregate_total_loss_objects(groups, loss, step, args):
    if groups.last_stage:
        loss = groups.dp.allreduce(loss, op=MPI.SUM) / groups.dp.Get_size()
        if groups.world.Get_rank() == args.hang_rank and step == args.hang_step:
            return loss  # the bug: the root skips its broadcast
    return groups.pp.bcast(loss, root=STAGES - 1)  # at: bcast_objects


def _aggregate_total_loss(groups, loss, step, args):
    if args.objects:
        return _aggregate_total_loss_objects(groups, loss, step, args)
    buf = array("d", [loss])
    if groups.last_stage:
        groups.dp.Allreduce(MPI.IN_PLACE, [buf, MPI.DOUBLE], op=MPI.SUM)
        buf[0] /= groups.dp.Get_size()
        if groups.world.Get_rank() == args.hang_rank and step == args.hang_step:
            return buf[0]  # the bug: the root skips its broadcast
    groups.pp.Bcast([buf, MPI.DOUBLE], root=STAGES - 1)  # at: bcast
    return buf[0]


def train_step(groups, step, args):
    loss = forward_backward(groups, step, args)
    loss = _aggregate_total_loss(groups, loss, step, args)  # at: aggregate
    if args.objects:
        groups.world.allreduce(1 if step + 1 == args.steps else 0, op=MPI.MAX)  # at: done_objects
        return loss
    done = array("i", [1 if step + 1 == args.steps else 0])
    groups.world.Allreduce(MPI.IN_PLACE, [done, MPI.INT], op=MPI.MAX)  # at: done
    return loss


def main():
    args = parse()
    groups = Groups(MPI.COMM_WORLD)
    for step in range(args.steps):
        loss = train_step(groups, step, args)
        if groups.world.Get_rank() == 0:
            print("step %d loss %.6f" % (step, loss), flush=True)
    groups.dp.Free()
    groups.pp.Free()


if __name__ == "__main__":
    main()
