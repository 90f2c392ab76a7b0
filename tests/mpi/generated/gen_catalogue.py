#!/usr/bin/env python3
"""Generate the catalogue of MPI bug programs, with the truth of each.

As MPI correctness suites do, the programs are not picked by hand: each
family below is a small description of one kind of bug, crossed with every
call it applies to (every collective and its nonblocking form; every
point-to-point mode, blocking and nonblocking, completed by each Wait* and
Test* call; probes; persistent requests; 2 to 8 ranks; eager and rendezvous
sizes). The generator computes each program's truth from the description:
the verdict, the culprit ranks, the call (or state) each rank is in, and
words the reasons must say. Nothing in the analyzer knows this file.

Each program is one C file whose header states its truth in one line,
  TRUTH np=4 verdict=hang culprits=2 ops=0:MPI_Bcast|MPI_Barrier,... words=never~entered
('|' separates the calls a rank may be in, as timing and the MPI library's
algorithms decide; '~' is a space). run_catalogue.py builds, runs and checks
them.

  gen_catalogue.py OUT_DIR            write every program and OUT_DIR/catalogue.txt
  gen_catalogue.py --list             one line per program: name family np
  gen_catalogue.py --families         the families, separated by ';' (for CMake)
"""
import os
import sys

# ---------------------------------------------------------------------------
# Collectives. Arguments are the program's variables: n (count), t (datatype),
# o (reduction), r (root), c (communicator); counts/displs/bdispls/types are
# arrays of n, 2*i, 8*i and t. Which arguments a call has decides which
# mismatch families apply to it. The v-forms' counts may differ from rank to
# rank by design (what must agree, each count with the peer's array entry,
# the trace does not hold): no count family for them.
COLLECTIVES = [
    ("Barrier", "c", ""),
    ("Bcast", "sbuf, n, t, r, c", "count dtype root"),
    ("Reduce", "sbuf, rbuf, n, t, o, r, c", "count dtype redop root"),
    ("Allreduce", "sbuf, rbuf, n, t, o, c", "count dtype redop"),
    ("Gather", "sbuf, n, t, rbuf, n, t, r, c", "count dtype root"),
    ("Gatherv", "sbuf, n, t, rbuf, counts, displs, t, r, c", "dtype root"),
    ("Scatter", "sbuf, n, t, rbuf, n, t, r, c", "count dtype root"),
    ("Scatterv", "sbuf, counts, displs, t, rbuf, n, t, r, c", "dtype root"),
    ("Allgather", "sbuf, n, t, rbuf, n, t, c", "count dtype"),
    ("Allgatherv", "sbuf, n, t, rbuf, counts, displs, t, c", "dtype"),
    ("Alltoall", "sbuf, n, t, rbuf, n, t, c", "count dtype"),
    ("Alltoallv", "sbuf, counts, displs, t, rbuf, counts, displs, t, c", "dtype"),
    ("Alltoallw", "sbuf, counts, bdispls, types, rbuf, counts, bdispls, types, c", ""),
    ("Reduce_scatter", "sbuf, rbuf, counts, t, o, c", "dtype redop"),
    ("Reduce_scatter_block", "sbuf, rbuf, n, t, o, c", "count dtype redop"),
    ("Scan", "sbuf, rbuf, n, t, o, c", "count dtype redop"),
    ("Exscan", "sbuf, rbuf, n, t, o, c", "count dtype redop"),
]


class Coll:
    """One collective call, blocking or nonblocking (completed by MPI_Wait)."""

    def __init__(self, name, args, fields, nonblocking):
        self.base = name
        self.name = ("MPI_I" + name[0].lower() + name[1:]) if nonblocking else "MPI_" + name
        self.args = args
        self.fields = set(fields.split())
        self.nonblocking = nonblocking
        # Where a rank waits for it: the call itself, or the wait that completes it.
        self.waits_in = "MPI_Wait" if nonblocking else self.name
        self.rooted = "root" in self.fields

    def code(self, comm="MPI_COMM_WORLD"):
        args = self.args[:-1] + comm  # the communicator is every call's last argument
        if self.nonblocking:
            return "%s(%s, &req);\n    MPI_Wait(&req, MPI_STATUS_IGNORE);" % (self.name, args)
        return "%s(%s);" % (self.name, args)


def all_collectives():
    for nb in (False, True):
        for name, args, fields in COLLECTIVES:
            yield Coll(name, args, fields, nb)


# ---------------------------------------------------------------------------
# Point-to-point forms. A receive form waits for a message from `peer` with
# tag `tag` on `comm`; `op` is the call a rank blocked in it is in.
RECV_FORMS = {
    "recv": ("MPI_Recv", "MPI_Recv(rbuf, n, MPI_INT, {peer}, {tag}, {comm}, MPI_STATUS_IGNORE);"),
    "irecv_wait": ("MPI_Wait", "MPI_Irecv(rbuf, n, MPI_INT, {peer}, {tag}, {comm}, &req);\n"
                   "    MPI_Wait(&req, MPI_STATUS_IGNORE);"),
    "irecv_waitall": ("MPI_Waitall", "MPI_Irecv(rbuf, n, MPI_INT, {peer}, {tag}, {comm}, &req);\n"
                      "    MPI_Waitall(1, &req, MPI_STATUSES_IGNORE);"),
    "irecv_waitany": ("MPI_Waitany", "MPI_Irecv(rbuf, n, MPI_INT, {peer}, {tag}, {comm}, &req);\n"
                      "    MPI_Waitany(1, &req, &index, MPI_STATUS_IGNORE);"),
    "irecv_waitsome": ("MPI_Waitsome", "MPI_Irecv(rbuf, n, MPI_INT, {peer}, {tag}, {comm}, &req);\n"
                       "    MPI_Waitsome(1, &req, &outcount, indices, MPI_STATUSES_IGNORE);"),
    "irecv_test": ("MPI_Test", "MPI_Irecv(rbuf, n, MPI_INT, {peer}, {tag}, {comm}, &req);\n"
                   "    for (flag = 0; !flag;) MPI_Test(&req, &flag, MPI_STATUS_IGNORE);"),
    "irecv_testall": ("MPI_Testall", "MPI_Irecv(rbuf, n, MPI_INT, {peer}, {tag}, {comm}, &req);\n"
                      "    for (flag = 0; !flag;) MPI_Testall(1, &req, &flag, MPI_STATUSES_IGNORE);"),
    "irecv_testany": ("MPI_Testany", "MPI_Irecv(rbuf, n, MPI_INT, {peer}, {tag}, {comm}, &req);\n"
                      "    for (flag = 0; !flag;) MPI_Testany(1, &req, &index, &flag, MPI_STATUS_IGNORE);"),
    "irecv_testsome": ("MPI_Testsome", "MPI_Irecv(rbuf, n, MPI_INT, {peer}, {tag}, {comm}, &req);\n"
                       "    for (outcount = 0; outcount == 0;) MPI_Testsome(1, &req, &outcount, indices, "
                       "MPI_STATUSES_IGNORE);"),
    "recv_init": ("MPI_Wait", "MPI_Recv_init(rbuf, n, MPI_INT, {peer}, {tag}, {comm}, &req);\n"
                  "    MPI_Start(&req);\n    MPI_Wait(&req, MPI_STATUS_IGNORE);\n    MPI_Request_free(&req);"),
    "probe": ("MPI_Probe", "MPI_Probe({peer}, {tag}, {comm}, &status);\n"
              "    MPI_Recv(rbuf, n, MPI_INT, {peer}, {tag}, {comm}, MPI_STATUS_IGNORE);"),
    "mprobe": ("MPI_Mprobe", "MPI_Mprobe({peer}, {tag}, {comm}, &message, &status);\n"
               "    MPI_Mrecv(rbuf, n, MPI_INT, &message, MPI_STATUS_IGNORE);"),
    "iprobe": ("MPI_Iprobe", "for (flag = 0; !flag;) MPI_Iprobe({peer}, {tag}, {comm}, &flag, &status);\n"
               "    MPI_Recv(rbuf, n, MPI_INT, {peer}, {tag}, {comm}, MPI_STATUS_IGNORE);"),
    "improbe": ("MPI_Improbe", "for (flag = 0; !flag;) MPI_Improbe({peer}, {tag}, {comm}, &flag, &message, &status);\n"
                "    MPI_Mrecv(rbuf, n, MPI_INT, &message, MPI_STATUS_IGNORE);"),
}

# A send form: (call a rank blocked in it is in, code, completes without the
# receiver at the given size). Bsend copies into the attached buffer: it
# never waits for the receiver; a standard send does only while it is small
# (eager); a synchronous one always waits.
SEND_FORMS = {
    "send": ("MPI_Send", "MPI_Send(sbuf, n, MPI_INT, {peer}, {tag}, {comm});", "eager"),
    "ssend": ("MPI_Ssend", "MPI_Ssend(sbuf, n, MPI_INT, {peer}, {tag}, {comm});", "never"),
    "bsend": ("MPI_Bsend", "MPI_Bsend(sbuf, n, MPI_INT, {peer}, {tag}, {comm});", "always"),
    "isend_wait": ("MPI_Wait", "MPI_Isend(sbuf, n, MPI_INT, {peer}, {tag}, {comm}, &req);\n"
                   "    MPI_Wait(&req, MPI_STATUS_IGNORE);", "eager"),
    "issend_wait": ("MPI_Wait", "MPI_Issend(sbuf, n, MPI_INT, {peer}, {tag}, {comm}, &req);\n"
                    "    MPI_Wait(&req, MPI_STATUS_IGNORE);", "never"),
    "ibsend_wait": ("MPI_Wait", "MPI_Ibsend(sbuf, n, MPI_INT, {peer}, {tag}, {comm}, &req);\n"
                    "    MPI_Wait(&req, MPI_STATUS_IGNORE);", "always"),
    "issend_test": ("MPI_Test", "MPI_Issend(sbuf, n, MPI_INT, {peer}, {tag}, {comm}, &req);\n"
                    "    for (flag = 0; !flag;) MPI_Test(&req, &flag, MPI_STATUS_IGNORE);", "never"),
    "send_init": ("MPI_Wait", "MPI_Send_init(sbuf, n, MPI_INT, {peer}, {tag}, {comm}, &req);\n"
                  "    MPI_Start(&req);\n    MPI_Wait(&req, MPI_STATUS_IGNORE);\n    MPI_Request_free(&req);", "eager"),
    "ssend_init": ("MPI_Wait", "MPI_Ssend_init(sbuf, n, MPI_INT, {peer}, {tag}, {comm}, &req);\n"
                   "    MPI_Start(&req);\n    MPI_Wait(&req, MPI_STATUS_IGNORE);\n    MPI_Request_free(&req);",
                   "never"),
}

SMALL, LARGE = 1, 1 << 20  # ints: eager under every transport; 4 MB: rendezvous


def send_waits_for_receiver(form, count):
    completes = SEND_FORMS[form][2]
    return completes == "never" or (completes == "eager" and count == LARGE)


# What a rank does instead of its part, and how the truth names it.
#   compute: never calls MPI again (sleeps in a loop): the call it is in is none
#   finish:  calls MPI_Finalize at once
#   barrier: goes on to the program's final barrier
ACTIONS = {
    "compute": ("compute", "for (;;) sleep(1);"),
    "finish": ("MPI_Finalize", "MPI_Finalize();\n    return 0;"),
    "barrier": ("MPI_Barrier", ""),
}


# ---------------------------------------------------------------------------
class Program:
    """A program: np ranks, a body per rank (C statements), then every rank
    enters a final MPI_Barrier on world and finalizes."""

    def __init__(self, family, name, np_, story):
        self.family, self.name, self.np, self.story = family, name, np_, story
        self.before_init = []    # statements before MPI_Init (the library's settings)
        self.setup = []          # statements every rank runs first
        self.branches = []       # (condition, statements)
        self.truth = {}          # verdict, culprits, ops (rank -> "a|b"), words

    def branch(self, cond, stmts):
        self.branches.append((cond, stmts))

    def set_truth(self, verdict, culprits=(), ops=None, words=""):
        self.truth = {"verdict": verdict, "culprits": sorted(set(culprits)), "ops": ops or {}, "words": words}

    def truth_line(self):
        t = self.truth
        ops = ",".join("%d:%s" % (r, t["ops"][r]) for r in sorted(t["ops"]))
        words = t["words"].replace(" ", "~")
        line = "TRUTH np=%d verdict=%s culprits=%s ops=%s" % (
            self.np, t["verdict"], ",".join(map(str, t["culprits"])), ops)
        return line + (" words=" + words if words else "")

    def source(self):
        out = ["/* Generated by tests/mpi/generated/gen_catalogue.py (family %s): do not edit." % self.family]
        for line in self.story.split("\n"):
            out.append(" * " + line)
        out.append(" * " + self.truth_line() + " */")
        init = "  MPI_Init(&argc, &argv);"
        out.append(PRELUDE.replace(init, "\n".join(["  " + b for b in self.before_init] + [init])))
        for s in self.setup:
            out.append("  " + s)
        first = True
        for cond, stmts in self.branches:
            if cond == "1":  # every other rank
                out.append("  {" if first else "  } else {")
            else:
                out.append("  %sif (%s) {" % ("" if first else "} else ", cond))
            out.append("    " + stmts)
            first = False
        if self.branches:
            out.append("  }")
        out.append(EPILOGUE)
        return "\n".join(out) + "\n"


PRELUDE = r"""#include <mpi.h>
#include <stdlib.h>
#include <unistd.h>
static int sbuf[1 << 21], rbuf[1 << 21];  /* room for a rendezvous message, twice */
int main(int argc, char** argv) {
  int rank, size, flag, index, outcount, indices[8], counts[64], displs[64], bdispls[64];
  int n = 1, r = 0;
  MPI_Datatype t = MPI_INT, types[64];
  MPI_Op o = MPI_SUM;
  MPI_Request req, reqs[8];
  MPI_Status status;
  MPI_Message message;
  MPI_Comm dup;
  static char bsend_buffer[1 << 16];
  (void)flag; (void)index; (void)outcount; (void)indices; (void)reqs; (void)status; (void)message;
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  /* An argument mismatch returns an error instead of aborting the job. */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Buffer_attach(bsend_buffer, sizeof bsend_buffer);"""

EPILOGUE = r"""  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return 0;
}"""

ARRAYS = ("for (int i = 0; i < 64; ++i) { counts[i] = n; displs[i] = 2 * i * n; "
          "bdispls[i] = 8 * i * n; types[i] = t; }")


def ranks_word(ranks):
    return ",".join(str(r) for r in ranks)


# ---------------------------------------------------------------------------
# Families.
def coll_skip():
    """One rank never enters a collective (it computes, or finishes); the
    others wait in it, or in the barrier after it when the library let them
    through without the missing rank."""
    for coll in all_collectives():
        skippers = [0, 3] if coll.rooted else [3]
        nps = [2, 3, 8] if coll.base in ("Barrier", "Allreduce", "Bcast", "Alltoall") and not coll.nonblocking else []
        variants = [(4, s, a) for s in skippers for a in ("compute", "finish")]
        variants += [(np_, np_ - 1, "compute") for np_ in nps]
        for np_, s, action in variants:
            name = "coll_skip_%s_np%d_r%d_%s" % (coll.name[4:].lower(), np_, s, action)
            p = Program("coll-skip", name, np_, "Rank %d of %d never enters %s on world (it %s); the others do."
                        % (s, np_, coll.name, {"compute": "computes", "finish": "finishes"}[action]))
            p.setup.append(ARRAYS)
            p.branch("rank == %d" % s, ACTIONS[action][1])
            p.branch("1", coll.code())
            others = coll.waits_in if coll.base == "Barrier" else coll.waits_in + "|MPI_Barrier"
            ops = {rk: others for rk in range(np_) if rk != s}
            ops[s] = ACTIONS[action][0]
            p.set_truth("hang", [s], ops, "never entered" if action == "compute" else "MPI_Finalize")
            yield p


def polling_server():
    """One rank serves in a loop that polls for a message from anyone (a
    probe or a test that returns at once, on MPI_ANY_SOURCE) that never
    comes; the others wait in a collective it never enters. The poller runs:
    it is the culprit, and the collective is not stuck below MPI. Each
    collective with one of the polls in turn, and every poll with the
    barrier."""
    polls = ["iprobe", "improbe", "irecv_test", "irecv_testall", "irecv_testany", "irecv_testsome"]
    pairs = [(coll, polls[i % len(polls)]) for i, coll in enumerate(all_collectives())]
    barrier = [c for c in all_collectives() if c.name == "MPI_Barrier"][0]
    pairs += [(barrier, form) for form in polls if (barrier.name, form) not in [(c.name, f) for c, f in pairs]]
    for coll, form in pairs:
        np_, s = 4, 3
        name = "polling_%s_%s" % (form, coll.name[4:].lower())
        p = Program("polling", name, np_, "Rank %d polls (%s) for a message from anyone that never comes; the "
                    "others wait in %s." % (s, form, coll.name))
        p.setup.append(ARRAYS)
        p.branch("rank == %d" % s, RECV_FORMS[form][1].format(peer="MPI_ANY_SOURCE", tag=99, comm="MPI_COMM_WORLD"))
        p.branch("1", coll.code())
        others = coll.waits_in if coll.base == "Barrier" else coll.waits_in + "|MPI_Barrier"
        ops = {rk: others for rk in range(np_) if rk != s}
        ops[s] = RECV_FORMS[form][0]
        p.set_truth("hang", [s], ops, "polling")
        yield p


def coll_order():
    """One rank calls the collective and then a barrier, the others the
    barrier first: at the same sequence number the calls differ (the job may
    hang or pass, as the library decides); that rank is the odd one. With
    two ranks it is a tie, one against one: nothing says which strayed, and
    both are named."""
    for coll in all_collectives():
        if coll.base == "Barrier":
            continue
        for np_ in (4, 2):
            s = 1
            name = "coll_order_%s" % coll.name[4:].lower() + ("_np2" if np_ == 2 else "")
            others = "ranks 0,2-3" if np_ == 4 else "rank 0"
            p = Program("coll-order", name, np_, "Rank %d calls %s then MPI_Barrier; %s the barrier first."
                        % (s, coll.name, others))
            p.setup.append(ARRAYS)
            p.branch("rank == %d" % s, coll.code() + "\n    MPI_Barrier(MPI_COMM_WORLD);")
            p.branch("1", "MPI_Barrier(MPI_COMM_WORLD);\n    " + coll.code())
            if np_ == 2:
                p.set_truth("mismatch", [0, 1], words="a tie")
            else:
                p.set_truth("mismatch", [s])
            yield p


MISMATCH_SETTINGS = {
    "root": ("r = 1;", "root"),
    "redop": ("o = MPI_MAX;", "redop"),
    "dtype": ("t = MPI_FLOAT;", "datatype"),
    "count": ("n = 2;", "count"),
}


def coll_args():
    """One rank passes another root, reduction, datatype or count than the
    others (the job may pass, hang or return errors); that rank is named."""
    for field, (setting, word) in MISMATCH_SETTINGS.items():
        for coll in all_collectives():
            if field not in coll.fields:
                continue
            np_, s = 4, 3
            name = "coll_%s_%s" % (field, coll.name[4:].lower())
            p = Program("coll-" + field, name, np_, "Rank %d passes %s to %s where the others pass %s."
                        % (s, setting.split("=")[1].strip(" ;"), coll.name,
                           {"root": "0", "redop": "MPI_SUM", "dtype": "MPI_INT", "count": "1"}[field]))
            p.setup.append("if (rank == %d) %s" % (s, setting))
            p.setup.append(ARRAYS)
            p.branch("1", coll.code())
            p.set_truth("mismatch", [s], words=word)
            yield p


def recv_unmatched():
    """Rank 1 waits for a message from rank 0 that rank 0 never sends (it
    computes, finishes, or goes on to the final barrier); rank 2 is a
    bystander in the barrier."""
    for form, (op, _) in RECV_FORMS.items():
        for action in ACTIONS:
            np_ = 3
            name = "recv_unmatched_%s_%s" % (form, action)
            p = Program("recv-unmatched", name, np_, "Rank 1 receives from rank 0 (%s); rank 0 never sends: it %s."
                        % (form, {"compute": "computes", "finish": "finishes", "barrier": "goes to the barrier"}[action]))
            p.branch("rank == 0", ACTIONS[action][1])
            p.branch("rank == 1", RECV_FORMS[form][1].format(peer=0, tag=0, comm="MPI_COMM_WORLD"))
            ops = {0: ACTIONS[action][0], 1: op, 2: "MPI_Barrier"}
            # In the barrier, rank 0 waits for rank 1 as rank 1 waits for it:
            # nothing tells "rank 0 forgot the send" from "rank 1 skipped the
            # barrier" (no earlier exchange shows the pattern): both are named.
            culprits = [0, 1] if action == "barrier" else [0]
            p.set_truth("hang", culprits, ops, "without sending" if action == "finish" else "never sent")
            yield p


def send_unreceived():
    """Rank 0 sends to rank 1, which never receives (computes, finishes, or
    goes on to the barrier). A send that waits for its receiver (synchronous,
    or rendezvous-sized) hangs there; one that completes alone does not."""
    for form in SEND_FORMS:
        for count in (SMALL, LARGE):
            if SEND_FORMS[form][2] != "eager" and count == LARGE:
                continue  # size changes nothing for them
            if form == "bsend" and count == LARGE or form == "ibsend_wait" and count == LARGE:
                continue
            for action in ACTIONS:
                np_ = 3
                size = "large" if count == LARGE else "small"
                name = "send_unreceived_%s_%s_%s" % (form, size, action)
                p = Program("send-unreceived", name, np_,
                            "Rank 0 sends %s %s to rank 1, which never receives it: it %s." %
                            (size, form, {"compute": "computes", "finish": "finishes",
                                          "barrier": "goes to the barrier"}[action]))
                p.setup.append("n = %d;" % count)
                p.branch("rank == 0", SEND_FORMS[form][1].format(peer=1, tag=0, comm="MPI_COMM_WORLD"))
                p.branch("rank == 1", ACTIONS[action][1])
                waits = send_waits_for_receiver(form, count)
                sender = SEND_FORMS[form][0] if waits else "MPI_Barrier"
                if form == "send_init" and not waits and action == "compute":
                    # A standard send may wait for its receiver to make
                    # progress: Open MPI 4.1's persistent one did in 3 of 4
                    # untraced runs, with rank 1 never calling MPI again
                    # (when rank 1 finishes or reaches the barrier, its
                    # progress completes it). Either place is the truth.
                    sender = "MPI_Wait|MPI_Barrier"
                if action == "barrier" and not waits:
                    # The message is never received and nobody waits for it.
                    p.set_truth("no-hang", [], {0: "exited", 1: "exited", 2: "exited"})
                elif action == "barrier":  # as recv_unmatched's barrier: either side may have strayed
                    p.set_truth("hang", [0, 1], {0: sender, 1: "MPI_Barrier", 2: "MPI_Barrier"}, "never received")
                else:
                    words = ("without receiving" if waits else "MPI_Finalize") if action == "finish" else ""
                    p.set_truth("hang", [1], {0: sender, 1: ACTIONS[action][0], 2: "MPI_Barrier"}, words)
                yield p


def envelope_mismatch():
    """A message is sent and a receive waits, but they disagree on the tag,
    the source or the communicator: both sides are named, with what was sent
    and what is awaited. A send that completes alone (small, eager) lets its
    sender go on: to the final barrier, or to MPI_Finalize (the send is in
    the trace, so the sender did not finish without sending: the envelope
    differs)."""
    sends = ["send", "ssend", "bsend", "isend_wait", "issend_wait", "send_init"]
    recvs = ["recv", "irecv_wait", "irecv_waitany", "irecv_test", "probe", "mprobe", "recv_init"]
    for kind in ("tag", "source", "comm"):
        for sform in sends if kind == "tag" else ["send", "issend_wait"]:
            for rform in recvs:
                for then in ("barrier", "finish"):
                    if then == "finish" and send_waits_for_receiver(sform, SMALL):
                        continue  # the sender stays in its send: the barrier case
                    np_ = 3 if kind == "source" else 2
                    name = "%s_mismatch_%s_%s" % (kind, sform, rform) + ("_then_finish" if then == "finish" else "")
                    send_comm, recv_comm, recv_src, recv_tag = "MPI_COMM_WORLD", "MPI_COMM_WORLD", 0, 0
                    if kind == "tag":
                        recv_tag = 1
                        story = "Rank 0 sends tag 0 to rank 1 (%s); rank 1 waits for tag 1 (%s)."
                    elif kind == "source":
                        recv_src = 2
                        story = "Rank 0 sends to rank 1 (%s); rank 1 waits for a message from rank 2 (%s)."
                    else:
                        send_comm = "dup"
                        story = "Rank 0 sends to rank 1 on a duplicate of world (%s); rank 1 waits on world (%s)."
                    if then == "finish":
                        story += " Rank 0 then finishes."
                    p = Program(kind + "-mismatch", name, np_, story % (sform, rform))
                    send = SEND_FORMS[sform][1].format(peer=1, tag=0, comm=send_comm)
                    p.branch("rank == 0", send + ("\n    " + ACTIONS["finish"][1] if then == "finish" else ""))
                    p.branch("rank == 1", RECV_FORMS[rform][1].format(peer=recv_src, tag=recv_tag, comm=recv_comm))
                    sender = SEND_FORMS[sform][0] if send_waits_for_receiver(sform, SMALL) else ACTIONS[then][0]
                    ops = {0: sender, 1: RECV_FORMS[rform][0]}
                    if np_ == 3:
                        ops[2] = "MPI_Barrier"
                    word = {"tag": "tag mismatch", "source": "source mismatch", "comm": "communicator mismatch"}[kind]
                    p.set_truth("hang", [0, 1], ops, word)
                    yield p


def cycles():
    """Ranks in a ring each wait on their neighbor first: receives first
    always deadlock; sends first deadlock when the send waits for its
    receiver (synchronous, rendezvous), and pass when it completes alone."""
    recvs = ["recv", "irecv_wait", "irecv_waitall", "irecv_test", "probe", "mprobe", "recv_init"]
    for i, rform in enumerate(recvs):
        np_ = [2, 3, 4][i % 3]
        name = "cycle_recv_first_%s_np%d" % (rform, np_)
        p = Program("cycle", name, np_, "Each of %d ranks receives from its left (%s) before it sends right." %
                    (np_, rform))
        p.branch("1", RECV_FORMS[rform][1].format(peer="(rank + size - 1) % size", tag=0, comm="MPI_COMM_WORLD")
                 + "\n    MPI_Send(sbuf, n, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD);")
        p.set_truth("deadlock", range(np_), {rk: RECV_FORMS[rform][0] for rk in range(np_)})
        yield p
    i = 0
    for sform in ["send", "ssend", "bsend", "isend_wait", "issend_wait", "send_init", "ssend_init"]:
        for count in (SMALL, LARGE):
            if SEND_FORMS[sform][2] != "eager" and count == LARGE:
                continue
            if sform == "bsend" and count == LARGE:
                continue
            np_ = [2, 3, 4][i % 3]
            i += 1
            size = "large" if count == LARGE else "small"
            name = "cycle_send_first_%s_%s_np%d" % (sform, size, np_)
            p = Program("cycle", name, np_, "Each of %d ranks sends %s right (%s) before it receives from its left."
                        % (np_, size, sform))
            p.setup.append("n = %d;" % count)
            p.branch("1", SEND_FORMS[sform][1].format(peer="(rank + 1) % size", tag=0, comm="MPI_COMM_WORLD")
                     + "\n    MPI_Recv(rbuf, n, MPI_INT, (rank + size - 1) % size, 0, MPI_COMM_WORLD, "
                       "MPI_STATUS_IGNORE);")
            if send_waits_for_receiver(sform, count):
                p.set_truth("deadlock", range(np_), {rk: SEND_FORMS[sform][0] for rk in range(np_)})
            else:
                p.set_truth("no-hang", [], {rk: "exited" for rk in range(np_)})
            yield p


# Completing several requests: the call that waits, and how it is looped
# until both requests are done.
COMPLETIONS = {
    "waitall": ("MPI_Waitall", "MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);"),
    "wait_each": ("MPI_Wait", "MPI_Wait(&reqs[0], MPI_STATUS_IGNORE);\n    MPI_Wait(&reqs[1], MPI_STATUS_IGNORE);"),
    "waitany": ("MPI_Waitany", "for (int k = 0; k < 2; ++k) MPI_Waitany(2, reqs, &index, MPI_STATUS_IGNORE);"),
    "waitsome": ("MPI_Waitsome", "for (int k = 0; k < 2; k += outcount) "
                 "MPI_Waitsome(2, reqs, &outcount, indices, MPI_STATUSES_IGNORE);"),
    "testall": ("MPI_Testall", "for (flag = 0; !flag;) MPI_Testall(2, reqs, &flag, MPI_STATUSES_IGNORE);"),
    "testany": ("MPI_Testany", "for (int k = 0; k < 2;) { MPI_Testany(2, reqs, &index, &flag, MPI_STATUS_IGNORE); "
                "if (flag && index != MPI_UNDEFINED) ++k; }"),
    "testsome": ("MPI_Testsome", "for (int k = 0; k < 2;) { MPI_Testsome(2, reqs, &outcount, indices, "
                 "MPI_STATUSES_IGNORE); if (outcount != MPI_UNDEFINED) k += outcount; }"),
}


def partial():
    """Rank 0 receives from ranks 1 and 2 at once and completes both; rank 1
    sends, rank 2 never does (it computes, or finishes)."""
    for comp, (op, code) in COMPLETIONS.items():
        for action in ("compute", "finish"):
            np_ = 3
            name = "partial_%s_%s" % (comp, action)
            p = Program("partial", name, np_, "Rank 0 posts receives from ranks 1 and 2 and completes them (%s); "
                        "rank 1 sends, rank 2 never does: it %s." % (comp, "computes" if action == "compute"
                                                                      else "finishes"))
            p.branch("rank == 0", "MPI_Irecv(rbuf, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, &reqs[0]);\n"
                     "    MPI_Irecv(rbuf + 1, 1, MPI_INT, 2, 0, MPI_COMM_WORLD, &reqs[1]);\n    " + code)
            p.branch("rank == 1", "MPI_Send(sbuf, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);")
            p.branch("rank == 2", ACTIONS[action][1])
            p.set_truth("hang", [2], {0: op, 1: "MPI_Barrier", 2: ACTIONS[action][0]},
                        "without sending" if action == "finish" else "never sent")
            yield p


def any_of():
    """Rank 0 receives from ranks 1 and 2 at once and completes either (an
    OR wait: Waitany, Waitsome, Testany, Testsome), then sends to the rank
    that waits for it; that rank waits in a receive from rank 0, the other
    computes. The computing rank alone could release rank 0: it is the
    culprit, and rank 0 with the waiting rank is no cycle. With Waitall or
    Testall (an AND wait) rank 0 needs both: it and the waiting rank are a
    deadlock whatever the computing rank does (which owes rank 0 too)."""
    completions = {"waitany": ("MPI_Waitany", "MPI_Waitany(2, reqs, &index, MPI_STATUS_IGNORE);"),
                   "waitsome": ("MPI_Waitsome", "MPI_Waitsome(2, reqs, &outcount, indices, MPI_STATUSES_IGNORE);"),
                   "testany": ("MPI_Testany", "for (flag = 0; !flag;) MPI_Testany(2, reqs, &index, &flag, "
                               "MPI_STATUS_IGNORE);"),
                   "testsome": ("MPI_Testsome", "for (outcount = 0; outcount == 0;) MPI_Testsome(2, reqs, &outcount, "
                                "indices, MPI_STATUSES_IGNORE);"),
                   "waitall": ("MPI_Waitall", "MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);"),
                   "testall": ("MPI_Testall", "for (flag = 0; !flag;) MPI_Testall(2, reqs, &flag, "
                               "MPI_STATUSES_IGNORE);")}
    for comp, (op, code) in completions.items():
        for computing in (1, 2):
            waiting = 3 - computing
            np_ = 3
            name = "any_of_%s_rank%d_computes" % (comp, computing)
            p = Program("any-of", name, np_, "Rank 0 receives from ranks 1 and 2 and completes them (%s), then sends "
                        "to rank %d, which waits for it; rank %d computes." % (comp, waiting, computing))
            p.branch("rank == 0", "MPI_Irecv(rbuf, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, &reqs[0]);\n"
                     "    MPI_Irecv(rbuf + 1, 1, MPI_INT, 2, 0, MPI_COMM_WORLD, &reqs[1]);\n    " + code +
                     "\n    MPI_Send(sbuf, 1, MPI_INT, %d, 1, MPI_COMM_WORLD);" % waiting)
            p.branch("rank == %d" % waiting, "MPI_Recv(rbuf, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);")
            p.branch("rank == %d" % computing, ACTIONS["compute"][1])
            ops = {0: op, waiting: "MPI_Recv", computing: "compute"}
            if comp.endswith("all"):  # the computing rank also owes rank 0 its message
                p.set_truth("deadlock", [0, waiting, computing], ops)
            else:
                p.set_truth("hang", [computing], ops, "never sent")
            yield p


def step_order():
    """Three steps of a collective and a message from rank 0 to rank 1, in
    one order or the other; in the third step one rank strays: it skips the
    collective (and waits for the message), or skips its half of the message
    (and waits in the collective). The steps before show the order, so the
    one that strayed is the culprit alone (no exchange before: see
    recv_unmatched's barrier action, where both are named)."""
    # Collectives no rank leaves before every rank entered (a broadcast's root
    # may: then what the others meet next decides, not this family's rule).
    colls = [c for c in all_collectives() if not c.nonblocking and c.base in ("Barrier", "Allreduce", "Alltoall")]
    for coll in colls:
        for order in ("coll_first", "msg_first"):
            for strays in ("sender", "receiver"):
                for sform, rform in (("send", "recv"), ("ssend", "recv"), ("send", "probe"), ("ssend", "irecv_wait")):
                    # A standard send of one int completes alone: a sender that
                    # skips the collective is not stuck in its send.
                    if strays == "sender" and order == "coll_first" and sform == "send":
                        continue
                    if strays == "receiver" and order == "msg_first" and sform == "send":
                        continue
                    np_ = 3
                    name = "step_order_%s_%s_%s_strays_%s_%s" % (coll.name[4:].lower(), order, sform, strays, rform)
                    send = SEND_FORMS[sform][1].format(peer=1, tag=0, comm="MPI_COMM_WORLD")
                    recv = RECV_FORMS[rform][1].format(peer=0, tag=0, comm="MPI_COMM_WORLD")
                    msg = {0: send, 1: recv, 2: ""}
                    stray_rank = 0 if strays == "sender" else 1
                    # Coll first: the stray skips the collective. Message first:
                    # it skips its half of the message.
                    what = "the collective" if order == "coll_first" else "its half of the message"
                    p = Program("step-order", name, np_,
                                "Three steps of %s and a message from rank 0 to rank 1 (%s, %s), %s; in the "
                                "third, rank %d skips %s." % (coll.name, sform, rform,
                                                              "the collective first" if order == "coll_first"
                                                              else "the message first", stray_rank, what))
                    p.setup.append(ARRAYS)
                    body = []
                    for rk in range(np_):
                        parts = []
                        skip = "if (step < 2 || rank != %d) " % stray_rank
                        c_code = coll.code().replace("\n", "\n      ")
                        m_code = msg[rk].replace("\n", "\n      ")
                        c_part = (skip if order == "coll_first" and rk == stray_rank else "") + "{ " + c_code + " }"
                        m_part = ((skip if order == "msg_first" and rk == stray_rank else "") + "{ " + m_code + " }"
                                  if m_code else "")
                        parts = [c_part, m_part] if order == "coll_first" else [m_part, c_part]
                        body.append("if (rank == %d) {\n      %s\n    }" % (rk, "\n      ".join(x for x in parts if x)))
                    p.branch("1", "for (int step = 0; step < 3; ++step) {\n    " + " else ".join(body) + "\n    }")
                    other = 1 - stray_rank
                    if order == "coll_first":  # the stray skipped the collective: it waits in its message
                        ops = {stray_rank: RECV_FORMS[rform][0] if stray_rank == 1 else SEND_FORMS[sform][0],
                               other: coll.name, 2: coll.name}
                        words = "never entered"
                    else:  # the stray skipped its half: it waits in the collective
                        ops = {stray_rank: coll.name, other: RECV_FORMS[rform][0] if other == 1
                               else SEND_FORMS[sform][0], 2: coll.name + "|MPI_Barrier"}
                        words = "never sent" if strays == "sender" else "never received"
                    p.set_truth("hang", [stray_rank], ops, words)
                    yield p


def wildcard_race():
    """Rank 0 receives twice from MPI_ANY_SOURCE, then once from rank 2 by
    name; ranks 1 and 2 send one message each. Whichever order the
    wildcards take them in, they take both: the named receive waits for a
    message already taken (a message race). Rank 0 is the culprit."""
    wild = ["recv", "irecv_wait", "irecv_test", "probe", "mprobe"]
    named = ["recv", "irecv_wait", "irecv_waitany", "irecv_test", "probe", "mprobe", "recv_init"]
    for w in wild:
        for nform in named:
            np_ = 3
            name = "wildcard_race_%s_then_%s" % (w, nform)
            p = Program("wildcard-race", name, np_, "Rank 0 receives twice from MPI_ANY_SOURCE (%s), then from rank 2 "
                        "(%s); ranks 1 and 2 send once each." % (w, nform))
            any_recv = RECV_FORMS[w][1].format(peer="MPI_ANY_SOURCE", tag=0, comm="MPI_COMM_WORLD")
            p.branch("rank == 0", any_recv + "\n    " + any_recv + "\n    " +
                     RECV_FORMS[nform][1].format(peer=2, tag=0, comm="MPI_COMM_WORLD"))
            p.branch("1", "MPI_Send(sbuf, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);")
            p.set_truth("hang", [0], {0: RECV_FORMS[nform][0], 1: "MPI_Barrier", 2: "MPI_Barrier"},
                        "MPI_ANY_SOURCE receives took")
            yield p


def comm_order():
    """Each step, a collective on world then one on a duplicate of world;
    rank s calls them the other way round, in the first step or the third
    (after two steps that show the order). Ranks wait for each other across
    the two communicators: s, missing from the collective the others are
    in, is the culprit."""
    names = ("Barrier", "Allreduce", "Allgather", "Alltoall")
    by_base = {c.base: c for c in all_collectives() if not c.nonblocking}
    i = 0
    for a in names:
        for b in names:
            for at_step in (0, 2):
                np_ = (3, 4)[i % 2]
                s = (1, np_ - 1)[(i // 2) % 2]
                i += 1
                name = "comm_order_%s_then_%s_np%d_r%d_step%d" % (a.lower(), b.lower(), np_, s, at_step)
                p = Program("comm-order", name, np_, "Three steps of MPI_%s on world then MPI_%s on a duplicate; in "
                            "step %d rank %d calls them the other way round." % (a, b, at_step, s))
                p.setup.append(ARRAYS)
                first, second = by_base[a].code(), by_base[b].code("dup")
                p.branch("1", "for (int step = 0; step < 3; ++step) {\n"
                              "      if (rank == %d && step == %d) {\n        %s\n        %s\n      } else {\n"
                              "        %s\n        %s\n      }\n    }" % (s, at_step, second, first, first, second))
                ops = {rk: "MPI_" + a for rk in range(np_)}
                ops[s] = "MPI_" + b
                p.set_truth("hang", [s], ops)
                yield p


# mpi4py: the object API (pickled; mpi4py builds some of it from sends and
# receives on a communicator of its own) and the buffer API (the MPI call).
PY_COLLECTIVES = {
    "barrier": "c.barrier()", "bcast": "c.bcast(step, root=0)", "reduce": "c.reduce(step, op=MPI.SUM, root=0)",
    "allreduce": "c.allreduce(step)", "gather": "c.gather(step, root=0)",
    "scatter": "c.scatter(list(range(size)) if rank == 0 else None, root=0)", "allgather": "c.allgather(step)",
    "alltoall": "c.alltoall(list(range(size)))",
    "Barrier": "c.Barrier()", "Bcast": "c.Bcast(one, root=0)", "Reduce": "c.Reduce(one, out, op=MPI.SUM, root=0)",
    "Allreduce": "c.Allreduce(one, out)", "Gather": "c.Gather(one, many, root=0)",
    "Scatter": "c.Scatter(many, one, root=0)", "Allgather": "c.Allgather(one, many)", "Alltoall": "c.Alltoall(many, many2)",
}


class PyProgram(Program):
    """An mpi4py program (Debian's python3-mpi4py): three steps of a
    collective on a duplicate of world, then a barrier on world."""

    def source(self):
        out = ["# Generated by tests/mpi/generated/gen_catalogue.py (family %s): do not edit." % self.family]
        out += ["# " + line for line in self.story.split("\n")]
        out.append("# " + self.truth_line())
        out.append(PY_PRELUDE)
        out += ["    " + line for line in self.setup]
        return "\n".join(out) + "\n"


PY_PRELUDE = """import array
import time
from mpi4py import MPI

world = MPI.COMM_WORLD
rank, size = world.Get_rank(), world.Get_size()
c = world.Dup()
one, out = array.array("i", [rank]), array.array("i", [0])
many, many2 = array.array("i", range(size)), array.array("i", [0] * size)
for step in range(3):"""


def mpi4py_skip():
    """Three steps of an mpi4py collective (object or buffer API) on a
    duplicate of world, each followed by a barrier on world; in the third
    step rank 2 skips the collective: it computes, or goes on to the
    barrier (the seed's hang, in Python)."""
    for coll, code in PY_COLLECTIVES.items():
        # A broadcast's root and leaves may all leave it without rank 2 (its
        # message unreceived) and meet it in the barrier: no hang to find.
        for action in ("compute",) if coll.lower() == "bcast" else ("compute", "next"):
            np_, s = 4, 2
            api = "object" if coll[0].islower() else "buffer"
            name = "mpi4py_%s_%s_%s" % (api, coll.lower(), action)
            p = PyProgram("mpi4py-skip", name, np_, "Rank 2 skips comm.%s in the third step: it %s." %
                          (coll, "computes" if action == "compute" else "goes on to the barrier on world"))
            stray = "while True:\n            time.sleep(1)" if action == "compute" else "pass"
            p.setup += ["if step == 2 and rank == %d:" % s, "    " + stray, "else:", "    " + code,
                        "world.Barrier()"]
            p.set_truth("hang", [s])
            yield p


# Open MPI's algorithms for the collectives that may let a member leave
# before the others entered (coll_tuned_<name>_algorithm; 0 is its own
# choice by size). Barrier and the all-to-all collectives need every member.
SERVED_EARLY = {"Bcast": 9, "Reduce": 7, "Gather": 3, "Scatter": 3}


def served_early():
    """A rooted collective on 8 ranks with a large message (1 MiB), each of
    Open MPI's algorithms forced in turn (OMPI_MCA_coll_tuned_*, set before
    MPI_Init), on world or on a half of it (MPI_Comm_split, root its rank
    0); a non-root rank skips it and goes on to the final barrier on world.
    The algorithm may serve some members and let them through to the barrier
    before the root blocks on the skipper: those members are never culprits.
    On world the skipper's barrier is matched against the collective (a
    mismatch); on a half it never entered the collective."""
    for base, algorithms in SERVED_EARLY.items():
        coll = [c for c in all_collectives() if c.base == base and not c.nonblocking][0]
        for comm in ("world", "half"):
            for algorithm in range(1, algorithms + 1):
                for s in (3, 7):
                    np_ = 8
                    name = "served_early_%s_%s_alg%d_r%d" % (base.lower(), comm, algorithm, s)
                    p = Program("served-early", name, np_, "Rank %d skips %s on %s (1 MiB, Open MPI algorithm %d) and "
                                "goes on to the barrier;\nthe algorithm may let members through first."
                                % (s, coll.name, comm, algorithm))
                    p.before_init += ['setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 1);',
                                      'setenv("OMPI_MCA_coll_tuned_%s_algorithm", "%d", 1);' % (base.lower(), algorithm)]
                    p.setup += ["n = %d;" % (1 << 18), ARRAYS]
                    target = "MPI_COMM_WORLD"
                    if comm == "half":
                        p.setup.append("MPI_Comm half;\n  MPI_Comm_split(MPI_COMM_WORLD, rank / 4, rank, &half);")
                        target = "half"
                    p.branch("rank == %d" % s, ACTIONS["barrier"][1])
                    p.branch("1", coll.code(target))
                    ops = {rk: coll.name + "|MPI_Barrier" for rk in range(np_) if rk != s}
                    ops[s] = "MPI_Barrier"
                    if comm == "world":
                        p.set_truth("mismatch", [s], ops, "calls MPI_Barrier as collective")
                    else:
                        p.set_truth("hang", [s], ops, "never entered")
                    yield p


# The pair's collective a rank skips in the composite family: the rank that
# skips it is odd, its pair's rank 1, and a broadcast's root, so that its
# partner waits for it whatever the algorithm.
PAIR_COLLECTIVES = {
    "Bcast": "pair.Bcast(one, root=1)",
    "Allreduce": "pair.Allreduce(one, out)", "Barrier": "pair.Barrier()",
}


def composite():
    """The seed's hang in mpi4py's object API, crossed: ranks in pairs (a
    pipeline of two stages) run a buffer collective on their pair, then an
    object collective on a duplicate of world, then a barrier on world. In
    the third step rank s skips its pair's collective and goes on: its
    partner waits for it in the pair; the others wait in the object
    collective, which mpi4py builds from messages and broadcasts on a
    communicator of its own (reduce, allreduce), so that some wait in a
    receive from the partner, a rank of another pair."""
    for pair_coll, pair_code in PAIR_COLLECTIVES.items():
        for coll in ("barrier", "bcast", "reduce", "allreduce", "gather", "scatter", "allgather", "alltoall"):
            for s in (1, 3):
                np_ = 4
                name = "composite_%s_%s_r%d" % (pair_coll.lower(), coll, s)
                p = PyProgram("composite", name, np_,
                              "Pairs {0,1} and {2,3}: pair.%s, then c.%s (objects) and a barrier on world;\n"
                              "rank %d skips pair.%s in the third step and goes on." % (pair_coll, coll, s, pair_coll))
                p.setup += ["if step == 0:", "    pair = world.Split(rank // 2, rank)",
                            "if not (step == 2 and rank == %d):" % s, "    " + pair_code,
                            PY_COLLECTIVES[coll], "world.Barrier()"]
                p.set_truth("hang", [s])
                yield p


# The calls of a window's or a file's life that are collective: each a
# call one rank skips, with what every rank does first (the window or file
# it works on). A file is made in the program's folder (the runner runs it
# in the job's own) and removed when it is closed.
WINDOW = "MPI_Win win;\n  static char wbuf[64];\n  void* wbase;\n  (void)wbuf; (void)wbase;"
FILE = "MPI_File fh;\n  char fbuf[64] = {0};\n  (void)fbuf;"
CREATE = {
    "win_create": "MPI_Win_create(wbuf, sizeof wbuf, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win);",
    "win_allocate": "MPI_Win_allocate(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &wbase, &win);",
    "win_allocate_shared": "MPI_Win_allocate_shared(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &wbase, &win);",
    "win_create_dynamic": "MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);",
    "file_open": "MPI_File_open(MPI_COMM_WORLD, \"catalogue.dat\", MPI_MODE_CREATE | MPI_MODE_RDWR | "
                 "MPI_MODE_DELETE_ON_CLOSE, MPI_INFO_NULL, &fh);",
}
HANDLE_CALLS = [  # (name, the call, what every rank makes first)
    ("MPI_Win_create", CREATE["win_create"], None),
    ("MPI_Win_allocate", CREATE["win_allocate"], None),
    ("MPI_Win_allocate_shared", CREATE["win_allocate_shared"], None),
    ("MPI_Win_create_dynamic", CREATE["win_create_dynamic"], None),
    ("MPI_File_open", CREATE["file_open"], None),
] + [("MPI_Win_fence", "MPI_Win_fence(0, win);", make) for make in
     ("win_create", "win_allocate", "win_allocate_shared", "win_create_dynamic")] + [
    ("MPI_Win_free", "MPI_Win_free(&win);", "win_allocate"),
    ("MPI_File_close", "MPI_File_close(&fh);", "file_open"),
    ("MPI_File_set_size", "MPI_File_set_size(fh, 64);", "file_open"),
    ("MPI_File_preallocate", "MPI_File_preallocate(fh, 64);", "file_open"),
    ("MPI_File_sync", "MPI_File_sync(fh);", "file_open"),
    ("MPI_File_set_view", "MPI_File_set_view(fh, 0, MPI_CHAR, MPI_CHAR, \"native\", MPI_INFO_NULL);", "file_open"),
    ("MPI_File_set_atomicity", "MPI_File_set_atomicity(fh, 1);", "file_open"),
    ("MPI_File_read_all", "MPI_File_read_all(fh, fbuf, 8, MPI_CHAR, MPI_STATUS_IGNORE);", "file_open"),
    ("MPI_File_write_all", "MPI_File_write_all(fh, fbuf, 8, MPI_CHAR, MPI_STATUS_IGNORE);", "file_open"),
    ("MPI_File_read_at_all", "MPI_File_read_at_all(fh, 8 * rank, fbuf, 8, MPI_CHAR, MPI_STATUS_IGNORE);",
     "file_open"),
    ("MPI_File_write_at_all", "MPI_File_write_at_all(fh, 8 * rank, fbuf, 8, MPI_CHAR, MPI_STATUS_IGNORE);",
     "file_open"),
    ("MPI_File_read_ordered", "MPI_File_read_ordered(fh, fbuf, 8, MPI_CHAR, MPI_STATUS_IGNORE);", "file_open"),
    ("MPI_File_write_ordered", "MPI_File_write_ordered(fh, fbuf, 8, MPI_CHAR, MPI_STATUS_IGNORE);", "file_open"),
]


def handle_skip():
    """One rank never enters a collective call of a window's or a file's
    life (its making, a fence, an MPI-IO access, its freeing or closing):
    it computes; the others wait in the call, or, where the library let
    them through without it, in the barrier after."""
    for call, code, make in HANDLE_CALLS:
        for s in (0, 3):
            np_ = 4
            name = "handle_skip_%s%s_r%d" % (call[4:].lower(), "_" + make if make else "", s)
            p = Program("handle-skip", name, np_, "Every rank makes %s; rank %d never enters %s (it computes); the "
                        "others do." % (make or "nothing", s, call))
            p.setup.append(WINDOW if (make or call).lower().find("win") >= 0 else FILE)
            if make:
                p.setup.append(CREATE[make])
            p.branch("rank == %d" % s, ACTIONS["compute"][1])
            p.branch("1", code)
            ops = {rk: call + "|MPI_Barrier" for rk in range(np_) if rk != s}
            ops[s] = "compute"
            p.set_truth("hang", [s], ops, "never entered")
            yield p


FAMILIES = [coll_skip, polling_server, coll_order, coll_args, recv_unmatched, send_unreceived, envelope_mismatch, cycles, partial,
            any_of, step_order, comm_order, wildcard_race, mpi4py_skip, composite, served_early,
            handle_skip]


def programs():
    seen = set()
    for family in FAMILIES:
        for p in family():
            assert p.name not in seen, p.name
            seen.add(p.name)
            yield p


def main(argv):
    if len(argv) == 2 and argv[1] == "--list":
        for p in programs():
            print(p.name, p.family, p.np)
        return 0
    if len(argv) == 2 and argv[1] == "--families":
        print(";".join(dict.fromkeys(p.family for p in programs())), end="")
        return 0
    if len(argv) != 2 or argv[1].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out = argv[1]
    os.makedirs(out, exist_ok=True)
    lines = []
    for p in programs():
        text = p.source()
        path = os.path.join(out, p.name + (".py" if isinstance(p, PyProgram) else ".c"))
        old = open(path).read() if os.path.exists(path) else None
        if old != text:  # unchanged programs keep their time stamps (no rebuild)
            with open("%s.%d" % (path, os.getpid()), "w") as f:
                f.write(text)
            os.replace("%s.%d" % (path, os.getpid()), path)
        lines.append("%s %s %s" % (p.name, p.family, p.truth_line()))
    # Written whole, then renamed: runs of several families at once (ctest -j)
    # each read it while another may be writing it.
    listing = os.path.join(out, "catalogue.txt")
    with open("%s.%d" % (listing, os.getpid()), "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace("%s.%d" % (listing, os.getpid()), listing)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
