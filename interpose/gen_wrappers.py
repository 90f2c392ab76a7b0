#!/usr/bin/env python3
"""Generates the wrappers from the call tables.

usage: gen_wrappers.py mpi SPEC FORMAT_H OUT.cc OUT.inc [OUT_ABI.cc]   (mpi.spec)
       gen_wrappers.py gpu SPEC FORMAT_H API OUT.cc OUT.h    (gpu.spec, API nccl|cuda|hip)

FORMAT_H is tracer/format.h: the API-neutral ops are its HANGTRACE_OPS
table, so a .spec names an op by the name OpName() gives it.

Each spec line `name | op | kind | parameters` becomes:
  * an entry of the call table written into every trace file (name, neutral
    op, matching flags), registered at start-up in spec order;
  * an exported `extern "C"` wrapper with the exact prototype of mpi.h (a
    mismatch is a compile error), which fills a record from the parameters'
    roles and then runs the template of its kind, calling the real PMPI_
    function found at first use.
The hand-written logic the templates call lives in mpi_support.{h,cc}.
With OUT_ABI.cc, the wrappers are built once per MPI ABI (Open MPI's, and
MPICH's, which Intel MPI, Cray MPICH and MVAPICH share) under prefixed
names, and OUT_ABI.cc exports each MPI symbol as a jump to the one the
process needs (mpi_abi.cc).

For gpu.spec (one API at a time, since the CUDA and HIP headers cannot meet
in one translation unit) each line becomes the same three things, plus an
entry of the symbol table that the dlsym, cuGetProcAddress and
hipGetProcAddress wrappers consult, so a function pointer handed out by a
lookup is wrapped exactly like a direct call. The hand-written logic lives in
gpu_support.{h,cc} and gpu_<api>.cc; OUT.h declares the After_<name> hooks
that gpu_<api>.cc defines.
"""
import re
import sys

OPS = {}  # op name -> enumerator, from tracer/format.h (read_ops)


def read_ops(format_h):
    """The X(kEnumerator, value, "name") lines of HANGTRACE_OPS."""
    with open(format_h) as f:
        text = f.read()
    ops = dict((name, enum) for enum, name in re.findall(r'X\((k\w+),\s*\d+,\s*"(\w+)"\)', text))
    if "allreduce" not in ops:
        sys.exit(f"{format_h}: no HANGTRACE_OPS table found")
    OPS.update(ops)


def flags_expr(kind_flags, roles):
    """The CallFlags of a call: its kind's, plus rooted when it has a root."""
    f = list(kind_flags)
    if "root" in roles:
        f.append("kCallRooted")
    return " | ".join(f"fmt::{x}" for x in f) or "0"


def read_spec(path, make):
    """Each non-comment line of `path` through make(index, line, by_name);
    errors name the file and line. Returns the calls, in order."""
    calls, by_name = [], {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                c = make(len(calls), line, by_name)
            except ValueError as e:
                sys.exit(f"{path}:{n}: {e}")
            if c.name in by_name:
                sys.exit(f"{path}:{n}: {c.name} listed twice")
            by_name[c.name] = c
            calls.append(c)
    return calls

# Every kind of call either spec names, and its matching flags: one table,
# one meaning per name. (The MPI kinds are described in mpi.spec, the GPU
# ones in gpu.spec; `enqcoll`, `enqsend` and `enqrecv` are enqueued on a
# stream and return at once, so they are not blocking, unlike MPI's.)
KINDS = {
    # mpi.spec
    "coll": ["kCallCollective", "kCallBlocking"],
    "icoll": ["kCallCollective", "kCallNonblocking"],
    "send": ["kCallP2p", "kCallBlocking"],
    "isend": ["kCallP2p", "kCallNonblocking"],
    "recv": ["kCallP2p", "kCallBlocking"],
    "irecv": ["kCallP2p", "kCallNonblocking"],
    "psend": ["kCallP2p", "kCallNonblocking"],
    "precv": ["kCallP2p", "kCallNonblocking"],
    "start": [],
    "mrecv": ["kCallP2p", "kCallBlocking"],
    "imrecv": ["kCallP2p", "kCallNonblocking"],
    "sendrecv": ["kCallP2p", "kCallBlocking"],
    "probe": ["kCallBlocking"],
    "iprobe": [],
    "wait": ["kCallCompletion", "kCallBlocking"],
    "test": ["kCallCompletion"],
    "create": ["kCallCollective", "kCallBlocking"],
    "icreate": ["kCallCollective", "kCallNonblocking"],
    "creategrp": ["kCallBlocking"],
    "free": ["kCallCollective", "kCallBlocking"],
    "hcreate": ["kCallCollective", "kCallBlocking"],
    "hfree": ["kCallCollective", "kCallBlocking"],
    "setname": [],
    "init": ["kCallBlocking"],
    "finalize": ["kCallBlocking", "kCallFinalize"],
    "abort": [],
    # gpu.spec
    "enqcoll": ["kCallCollective"],
    "enqsend": ["kCallP2p"],
    "enqrecv": ["kCallP2p"],
    "gstart": [],
    "gend": ["kCallBlocking"],
    "hook": ["kCallBlocking"],
    "seqhook": ["kCallCollective", "kCallBlocking"],
    "poll": [],
    "launch": [],
    "sync": ["kCallBlocking"],
}
MPI_KINDS = {"coll", "icoll", "send", "isend", "recv", "irecv", "psend", "precv", "start", "mrecv", "imrecv",
             "sendrecv", "probe", "iprobe", "wait", "test", "create", "icreate", "creategrp", "free", "hcreate",
             "hfree", "setname", "init", "finalize", "abort"}
GPU_KINDS = set(KINDS) - MPI_KINDS

ROLES = {"comm", "count", "dtype", "redop", "root", "peer", "tag", "recvpeer", "recvtag", "request",
         "requests", "nreq", "status", "statuses", "index", "outcount", "indices", "flag", "newcomm",
         "color", "key", "provided", "freecomm", "name", "message", "win", "newwin", "freewin", "file", "newfile",
         "freefile"}
# The roles of a window's or file's handle: which kind of communicator
# table entry it is (HandleCreated).
HANDLE_KIND = {"newwin": "fmt::CommKind::kMpiWindow", "newfile": "fmt::CommKind::kMpiFile"}


class Param:
    def __init__(self, text, roles=ROLES):
        text = text.strip()
        self.role = None
        if "@" in text:
            text, self.role = [t.strip() for t in text.split("@")]
            if self.role not in roles:
                raise ValueError(f"unknown role '{self.role}' in '{text}'")
        self.text = text
        m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*(\[\])?$", text)
        if not m:
            raise ValueError(f"cannot find the parameter name in '{text}'")
        self.name = m.group(1)


class Call:
    def __init__(self, index, line, by_name=None):
        fields = [f.strip() for f in line.split("|")]
        if len(fields) != 4:
            raise ValueError(f"expected 'name | op | kind | parameters': {line}")
        self.index = index
        self.name, self.op, self.kind, params = fields
        if self.op not in OPS:
            raise ValueError(f"{self.name}: unknown op '{self.op}'")
        if self.kind not in MPI_KINDS:
            raise ValueError(f"{self.name}: unknown kind '{self.kind}' (mpi.spec's kinds: {sorted(MPI_KINDS)})")
        self.params = [Param(p) for p in params.split(",")] if params else []
        self.roles = {p.role: p.name for p in self.params if p.role}

    def flags(self):
        f = flags_expr(KINDS[self.kind], self.roles)
        # A counts array (recvcounts[], sendcounts[]): the v/w collectives,
        # whose per-rank counts are no signature.
        if any(re.search(r"counts\s*\[\]", p.text) for p in self.params):
            f += " | fmt::kCallPerRankCounts"
        return f

    def args(self, substitute=None):
        substitute = substitute or {}
        return ", ".join(substitute.get(p.role, p.name) for p in self.params)


# What each role puts into the record, in this order ({} is the parameter).
ROLE_CODE = [
    ("comm", "r.comm = CommIndex({});"),
    ("freecomm", "r.comm = CommIndex(*{});"),
    ("win", "r.comm = HandleIndex(HandleKey({}));"),
    ("file", "r.comm = HandleIndex(HandleKey({}));"),
    ("freewin", "r.comm = HandleIndex(HandleKey(*{}));"),
    ("freefile", "r.comm = HandleIndex(HandleKey(*{}));"),
    ("count", "r.count = uint64_t(int64_t({}));"),
    ("nreq", "r.count = uint64_t(int64_t({}));"),
    ("dtype", "r.dtype = Dtype({});"),
    ("redop", "r.redop = Redop({});"),
    ("root", "SetPeer(r, {});"),
    ("peer", "SetPeer(r, {});"),
    ("tag", "SetTag(r, {});"),
]


# The roles whose line sets the record's communicator (NewRecord's kSetsComm).
COMM_ROLES = {role for role, code in ROLE_CODE if code.startswith("r.comm =")}


# Kinds whose sequence number is a stream's: the communicator comes with
# its streams' part of the key (CommForStreams, `cs`).
STREAM_KINDS = {"send", "isend", "recv", "irecv", "sendrecv"}
STREAM_COMM = "const CommStreams cs = {}({});\nr.comm = cs.index;"


def new_record(index_expr, roles):
    """The record's first line: NewRecord, told which of the communicator
    and the peer the wrapper's own lines set on every path (`roles`: the
    roles whose lines it emits)."""
    sets = []
    if set(roles) & COMM_ROLES:
        sets.append("kSetsComm")
    if "peer" in roles or "root" in roles:
        sets.append("kSetsPeer")
    return f"fmt::Record r = NewRecord({index_expr}{', ' + ' | '.join(sets) if sets else ''});"


def role_assignments(c):
    lines = []
    for role, code in ROLE_CODE:
        if role not in c.roles:
            continue
        if role == "comm" and c.kind in STREAM_KINDS:
            code = STREAM_COMM.format("CommForStreams", "{}")
        lines += code.format(c.roles[role]).split("\n")
    return lines


BLOCKING = """const Recorded rec = CallBeginOuter(r);
int ret = real({args});
{after}CallEnd(r, ret, rec);
return ret;"""


def body(c):
    r = c.roles
    args = c.args()
    k = c.kind
    status_sub = {"status": "st"}
    sequence_receive = f"SequenceReceive(r, cs.where, {r.get('peer')}, {r.get('tag')});\n"
    matched_receive = f"MatchedReceive(r, MessageKey(*{r.get('message')}));\n"
    own_status = (f"MPI_Status own_status;\n"
                  f"MPI_Status* st = {r.get('status')} == MPI_STATUS_IGNORE ? &own_status : {r.get('status')};")
    if k == "coll":
        return "r.seq = NextCollSeq(r.comm);\n" + BLOCKING.format(args=args, after="")
    if k == "icoll":
        return (f"r.seq = NextCollSeq(r.comm);\nint ret = real({args});\n"
                f"if (ret == MPI_SUCCESS) Posted(r, *{r['request']});\nreturn ret;")
    if k in ("send", "isend"):
        head = f"SequenceSend(r, cs.where, {r['peer']}, {r['tag']});\n"
        if k == "send":
            return head + BLOCKING.format(args=args, after="")
        return head + f"int ret = real({args});\nif (ret == MPI_SUCCESS) Posted(r, *{r['request']});\nreturn ret;"
    if k in ("recv", "mrecv"):
        # Only a receive with no sequence number yet (a wildcard's, a
        # matched message's) reads its status: the others pass the
        # program's on and look at nothing after the call.
        head = sequence_receive if k == "recv" else matched_receive
        return (head + f"MPI_Status own_status;\nMPI_Status* st = r.seq == 0 && {r['status']} == MPI_STATUS_IGNORE ? "
                f"&own_status : {r['status']};\n" + BLOCKING.format(
                    args=c.args(status_sub), after="ReceiveReturned(r, ret, st);\n"))
    if k in ("irecv", "imrecv"):
        head = sequence_receive if k == "irecv" else matched_receive
        return head + f"int ret = real({args});\nif (ret == MPI_SUCCESS) Posted(r, *{r['request']});\nreturn ret;"
    if k == "sendrecv":
        return (f"SequenceSend(r, cs.where, {r['peer']}, {r['tag']});\n"
                "fmt::Record recv = r;\nrecv.seq = 0;\nrecv.flags = 0;\n"
                f"SetPeer(recv, {r['recvpeer']});\nSetTag(recv, {r['recvtag']});\n"
                f"SequenceReceive(recv, cs.where, {r['recvpeer']}, {r['recvtag']});\n"
                "r.aux = uint32_t(recv.seq);\nSendrecvSource(r, recv);\n" + own_status + "\n" +
                BLOCKING.format(args=c.args(status_sub),
                                after="if (ret == MPI_SUCCESS) {\n  ResolveReceive(recv, st);\n"
                                      "  r.aux = uint32_t(recv.seq);\n  SendrecvSource(r, recv);\n}\n"))
    matched = message_matched(c, "ret == MPI_SUCCESS", f"*{r.get('message')}") + "\n" if "message" in r else ""
    if k == "probe":
        return BLOCKING.format(args=args, after=matched)
    if k == "iprobe":  # polled: a probe that finds nothing marks the thread as waiting by polling
        return (f"int ret = real({args});\nif (ret == MPI_SUCCESS && !*{r['flag']}) NotePolling(r);\n"
                f"else EndPolling();\n" + matched + "return ret;")
    if k in ("wait", "test"):
        return completion_body(c)
    if k in ("create", "creategrp"):
        collective = "true" if k == "create" else "false"
        head = "r.seq = NextCollSeq(r.comm);\n" if k == "create" else ""
        after = (f"if (ret == MPI_SUCCESS) CommCreated(r.call, {r['comm']}, *{r['newcomm']}, "
                 f"{r.get('color', '-1')}, {r.get('key', '-1')}, {collective}, false);\n")
        return head + BLOCKING.format(args=args, after=after)
    if k == "icreate":
        return (f"r.seq = NextCollSeq(r.comm);\nint ret = real({args});\n"
                f"if (ret == MPI_SUCCESS) {{\n  CommCreated(r.call, {r['comm']}, *{r['newcomm']}, -1, -1, true, true);\n"
                f"  Posted(r, *{r['request']});\n}}\nreturn ret;")
    if k == "free":
        return (f"MPI_Comm freed = *{r['freecomm']};\nr.seq = NextCollSeq(r.comm);\n" +
                BLOCKING.format(args=args, after="if (ret == MPI_SUCCESS) CommFreeing(freed);\n"))
    if k == "hcreate":  # a window or file, collective over its communicator
        new_role = next(role for role in HANDLE_KIND if role in r)
        return ("r.seq = NextCollSeq(r.comm);\n" +
                BLOCKING.format(args=args, after=f"if (ret == MPI_SUCCESS) HandleCreated(r.call, {r['comm']}, "
                                                 f"HandleKey(*{r[new_role]}), {HANDLE_KIND[new_role]});\n"))
    if k == "hfree":  # MPI_Win_free, MPI_File_close: collective over the window or file
        freed = r.get("freewin", r.get("freefile"))
        return (f"const uint64_t freed = HandleKey(*{freed});\nr.seq = NextCollSeq(r.comm);\n" +
                BLOCKING.format(args=args, after="if (ret == MPI_SUCCESS) HandleFreeing(freed);\n"))
    if k == "init":
        # The handlers the library installs in it are the library's.
        provided = f"{r['provided']} ? *{r['provided']} : MPI_THREAD_SINGLE" if "provided" in r else "MPI_THREAD_SINGLE"
        return ("LibraryInitializing(true);\n" +
                BLOCKING.format(args=args, after=f"LibraryInitializing(false);\nif (ret == MPI_SUCCESS) Initialized({provided});\n"))
    if k == "finalize":
        return BLOCKING.format(args=args, after="")
    if k in ("psend", "precv"):
        return f"int ret = real({args});\nif (ret == MPI_SUCCESS) PersistentMade(r, *{r['request']});\nreturn ret;"
    if k == "start":
        if "request" in r:
            return f"int ret = real({args});\nif (ret == MPI_SUCCESS) PersistentStarted(*{r['request']});\nreturn ret;"
        return (f"int ret = real({args});\nif (ret == MPI_SUCCESS) {{\n"
                f"  for (int k = 0; k < {r['nreq']}; ++k) PersistentStarted({r['requests']}[k]);\n}}\nreturn ret;")
    if k == "abort":
        return f"CallBeginOuter(r);  // never ended: the process is going away\nreturn real({args});"
    raise ValueError(k)


def message_matched(c, ok, message):
    """A matched probe's message remembers its communicator for the receive
    (MPI_Mrecv names none): once the probe succeeded, and for a polled one,
    found it. `message` is the C handle."""
    found = f"{ok} && *{c.roles['flag']}" if c.kind == "iprobe" else ok
    return f"if ({found}) MessageMatched(MessageKey({message}), r.comm);"


def completion_lines(c, save, status_of, one_based, ok, call, end):
    """Wait*/Test*, in C or Fortran: `save` saves the requests (the call
    overwrites retired ones) as C requests in `saved`, the call runs, then
    every request it retired is ENDed with `status_of(k)`, its status. An
    index is `one_based` in Fortran. `ok` tests the call's result; `end`
    ends a wait's record."""
    r = c.roles
    n = "1" if "request" in r else (r["nreq"] if not one_based else f"*{r['nreq']}")
    lines = list(save)
    if c.kind == "wait":
        lines.append(f"if ({n} > 0) r.handle = RequestKey(saved[0]);")
    cond = ok + (f" && *{r['flag']}" if "flag" in r else "")
    base = " - 1" if one_based else ""
    if "index" in r:
        retire = (f"if ({cond} && *{r['index']} != MPI_UNDEFINED) "
                  f"Retire(saved[*{r['index']}{base}], {status_of('0')});")
    elif "outcount" in r:
        retire = (f"if ({cond} && *{r['outcount']} != MPI_UNDEFINED) {{\n"
                  f"  for (int k = 0; k < *{r['outcount']}; ++k) "
                  f"Retire(saved[{r['indices']}[k]{base}], {status_of('k')});\n}}")
    elif "request" in r:
        retire = f"if ({cond}) Retire(saved[0], {status_of('0')});"
    else:
        retire = f"if ({cond}) {{\n  for (int k = 0; k < {n}; ++k) Retire(saved[k], {status_of('k')});\n}}"
    if c.kind == "wait":
        return lines + ["const Recorded rec = CallBeginOuter(r);", call, retire, end]
    # Polled: only the retired requests are recorded; a poll that retires
    # nothing marks the thread as waiting by polling (NotePolling).
    waiting = f"{ok} && *{r['outcount']} == 0" if "outcount" in r else f"{ok} && !*{r['flag']}"
    return lines + [call, retire,
                    f"if ({waiting} && {n} > 0) {{\n  r.handle = RequestKey(saved[0]);\n  NotePolling(r);\n"
                    f"}} else {{\n  EndPolling();\n}}"]


def completion_body(c):
    """Wait*/Test* in C: the statuses in the program's buffer, or in one of
    the thread's when it passed MPI_STATUS(ES)_IGNORE."""
    r = c.roles
    n = "1" if "request" in r else r["nreq"]
    save = [f"MPI_Request* saved = SaveRequests(1, {r['request']});" if "request" in r else
            f"MPI_Request* saved = SaveRequests({r['nreq']}, {r['requests']});"]
    if "statuses" in r:
        save.append(f"MPI_Status* sts = StatusBuffer({r['statuses']}, {r['statuses']} == MPI_STATUSES_IGNORE, {n});")
        sub = {"statuses": "sts"}
        status_of = lambda k: f"&sts[{k}]"
    else:
        save.append(f"MPI_Status* sts = StatusBuffer({r['status']}, {r['status']} == MPI_STATUS_IGNORE, 1);")
        sub = {"status": "sts"}
        status_of = lambda k: "sts"
    lines = completion_lines(c, save, status_of, False, "ret == MPI_SUCCESS", f"int ret = real({c.args(sub)});",
                             "CallEnd(r, ret, rec);")
    return "\n".join(lines + ["return ret;"])


def indent(text, n=2):
    return "\n".join((" " * n + l) if l else l for l in text.split("\n"))


def lazy_real(stub, type_, slot, name, call):
    """The slot of a real function, bound lazily as a PLT entry is: it
    starts at `stub`, which finds the real function `name`, puts it in the
    slot and makes the call (`call`, with {} for the function). A wrapper
    calls through the slot and never tests it."""
    stub_name = stub.split("(")[0].split()[-1]
    resolve = f'Resolve({slot}, "{name}")'
    return [f"static {stub};",
            f"static {type_} {slot} = {stub_name};",
            f"static {stub} {{ {call.format(resolve)} }}"]


def generate(calls, inc_name):
    out = [
        "// Generated by interpose/gen_wrappers.py from interpose/mpi.spec. Do not edit.",
        '#include "interpose/mpi_support.h"',
        "",
        "namespace hangtrace::HT_MPI_NS {",
        "",
        "const CallSpec kMpiCalls[] = {",
        f'#include "{inc_name}"',
    ]
    out += [
        "};",
        f"const int kNumMpiCalls = {len(calls)};",
        f"uint16_t g_mpi_call[{len(calls)}];",
        "",
        "}  // namespace hangtrace::HT_MPI_NS",
        "",
        "using namespace hangtrace;",
        "using namespace hangtrace::HT_MPI_NS;",
        "",
    ]
    for c in calls:
        params = ", ".join(p.text for p in c.params) or "void"
        out += lazy_real(f"int First_{c.name}({params})", f"decltype(&P{c.name})", f"g_real_{c.name}",
                         f"P{c.name}", f"return {{}}({c.args()});")
        out.append(f"HT_MPI_EXPORT int HT_MPI_SYMBOL({c.name})({params}) {{")
        out.append(f"  auto real = __atomic_load_n(&g_real_{c.name}, __ATOMIC_ACQUIRE);")
        if c.kind == "setname":
            out.append(f"  int ret = real({c.args()});")
            out.append(f"  if (ret == MPI_SUCCESS && g_trace && MpiReady()) CommNamed({c.roles['comm']}, {c.roles['name']});")
            out.append("  return ret;")
            out.append("}")
            out.append("")
            continue
        out.append(f"  if (!Tracing()) return real({c.args()});")
        # Polled calls (test) record no call of their own, only a polling
        # state; Start/Startall nothing of their own: the requests they
        # start are posted as the Isend/Irecv made with *_init.
        assigned = c.roles if c.kind not in ("test", "start") else {}
        if c.kind != "start":
            out.append("  " + new_record(f"g_mpi_call[{c.index}]", assigned))
        if assigned:
            out += ["  " + a for a in role_assignments(c)]
        out.append(indent(body(c)))
        out.append("}")
        out.append("")
    out += generate_fortran(calls)
    return "\n".join(out) + "\n"


# --- Fortran (Open MPI's mpif.h, `use mpi` and `use mpi_f08`) -----------------
#
# Open MPI's Fortran bindings call the profiling layer directly, never the C
# MPI_* functions: a Fortran program's calls reach no C wrapper. Each call of
# these kinds gets Fortran wrappers too, recorded as the C call is (same call
# table entry, same record) around the real Fortran function: under every
# name a compiler may call it (mpi_allreduce_, mpi_allreduce,
# mpi_allreduce__, MPI_ALLREDUCE: mpif.h and `use mpi`) and under
# ompi_allreduce_f, which `use mpi_f08`'s mpi_allreduce_f08 calls. Handles
# are Fortran integers, made C handles with the MPI's own *_f2c.
FORTRAN_KINDS = {"coll", "icoll", "send", "isend", "recv", "irecv", "sendrecv", "probe", "iprobe", "mrecv", "imrecv",
                 "psend", "precv", "start", "wait", "test", "create", "icreate", "creategrp", "free", "init",
                 "finalize", "abort", "setname"}
# MPI_Comm_set_name's name is a CHARACTER: its length comes after ierror,
# hidden (a size_t from gfortran; Open MPI's ompi_comm_set_name_f, which
# `use mpi_f08` calls, takes it as an int: the same register, read as int).
# What a role's Fortran argument (a pointer to MPI_Fint) puts into the
# record (handles through caches keyed by the Fortran integer: *_f2c is a
# call into the MPI each time).
FORTRAN_ROLE = {"comm": "r.comm = FortranCommIndex(*{});", "dtype": "r.dtype = FortranDtype(*{});",
                "redop": "r.redop = FortranRedop(*{});", "count": "r.count = uint64_t(int64_t(*{}));",
                "root": "SetPeer(r, *{});", "peer": "SetPeer(r, *{});", "tag": "SetTag(r, *{});",
                "nreq": "r.count = uint64_t(int64_t(*{}));", "freecomm": "r.comm = FortranCommIndex(*{});"}
# Windows and files are not followed from Fortran yet: their handles need
# MPI_Win_f2c/MPI_File_f2c caches, and MPI_File_open's file name is a
# CHARACTER whose hidden length the wrapper would have to pass on. Their
# Fortran calls reach the MPI untraced, as before (docs/MPI.md).
HANDLE_ROLES = {"win", "newwin", "freewin", "file", "newfile", "freefile"}


def has_fortran(c):
    return c.kind in FORTRAN_KINDS and not (set(c.roles) & HANDLE_ROLES)


def fortran_params(c):
    """The Fortran prototype: buffers stay void*, every other argument is a
    pointer to MPI_Fint, then ierror. MPI_Init takes ierror only."""
    if c.kind == "init" and "provided" not in c.roles:
        return [], "MPI_Fint* ierr"
    params = []
    for p in c.params:
        if c.kind == "init" and p.name in ("argc", "argv"):
            continue
        params.append(("void* " if "void" in p.text else "MPI_Fint* ") + p.name)
    return [p.split()[-1] for p in params], ", ".join(params + ["MPI_Fint* ierr"])


def fortran_body(c):
    r = c.roles
    lines = []
    if c.kind not in ("test", "start"):  # polled, or no record of its own (as in C)
        for role, _ in ROLE_CODE:
            if role in r and role in FORTRAN_ROLE:
                code = FORTRAN_ROLE[role]
                if role == "comm" and c.kind in STREAM_KINDS:
                    code = STREAM_COMM.format("FortranCommForStreams", "*{}")
                lines += code.format(r[role]).split("\n")
    call = "real(" + ", ".join(fortran_params(c)[0] + ["ierr"]) + ");"
    ok = "*ierr == MPI_SUCCESS"
    k = c.kind
    if k in ("coll", "icoll", "create", "icreate", "free"):
        if k == "free":
            lines.append(f"const MPI_Comm freed = FortranComm(*{r['freecomm']});")
        lines.append("r.seq = NextCollSeq(r.comm);")
    elif k in ("send", "isend", "sendrecv"):
        lines.append(f"SequenceSend(r, cs.where, *{r['peer']}, *{r['tag']});")
    elif k in ("recv", "irecv"):
        lines.append(f"SequenceReceive(r, cs.where, *{r['peer']}, *{r['tag']});")
    elif k in ("mrecv", "imrecv"):
        lines.append(f"MatchedReceive(r, MessageKey(FortranMessage(*{r['message']})));")
    if k in ("icoll", "isend", "irecv", "imrecv"):
        return "\n".join(lines + [call, f"if ({ok}) Posted(r, FortranRequest(*{r['request']}));"])
    matched = [message_matched(c, ok, f"FortranMessage(*{r['message']})")] if "message" in r else []
    if k == "iprobe":  # polled, as in C
        return "\n".join(lines + [call, f"if ({ok} && !*{r['flag']}) NotePolling(r);", "else EndPolling();"] +
                          matched)
    if k in ("psend", "precv"):
        return "\n".join(lines + [call, f"if ({ok}) PersistentMade(r, FortranRequest(*{r['request']}));"])
    if k == "start":
        if "request" in r:
            return "\n".join(lines + [call, f"if ({ok}) PersistentStarted(FortranRequest(*{r['request']}));"])
        return "\n".join(lines + [call, f"if ({ok}) {{",
                                   f"  for (int k = 0; k < *{r['nreq']}; ++k) "
                                   f"PersistentStarted(FortranRequest({r['requests']}[k]));", "}"])
    if k == "icreate":
        return "\n".join(lines + [call, f"if ({ok}) {{",
                                   f"  CommCreated(r.call, FortranComm(*{r['comm']}), FortranComm(*{r['newcomm']}), "
                                   "-1, -1, true, true);",
                                   f"  Posted(r, FortranRequest(*{r['request']}));", "}"])
    if k == "abort":
        return "\n".join(lines + ["CallBeginOuter(r);  // never ended: the process is going away", call])
    if k == "sendrecv":
        lines += ["fmt::Record recv = r;", "recv.seq = 0;", "recv.flags = 0;",
                  f"SetPeer(recv, *{r['recvpeer']});", f"SetTag(recv, *{r['recvtag']});",
                  f"SequenceReceive(recv, cs.where, *{r['recvpeer']}, *{r['recvtag']});",
                  "r.aux = uint32_t(recv.seq);", "SendrecvSource(r, recv);", "const Recorded rec = CallBeginOuter(r);",
                  call,
                  f"if ({ok}) {{", f"  ResolveFortranReceive(recv, {r['status']});",
                  "  r.aux = uint32_t(recv.seq);", "  SendrecvSource(r, recv);", "}", "CallEnd(r, *ierr, rec);"]
        return "\n".join(lines)
    if k in ("wait", "test"):
        return "\n".join(lines + fortran_completion(c, call, ok))
    if k == "init":
        lines += ["LibraryInitializing(true);", "const Recorded rec = CallBeginOuter(r);", call, "LibraryInitializing(false);",
                  f"if ({ok}) Initialized(" +
                  (f"*{r['provided']}" if "provided" in r else "MPI_THREAD_SINGLE") + ");"]
    else:
        lines += ["const Recorded rec = CallBeginOuter(r);", call]
    if k in ("recv", "mrecv"):  # as in C: only a receive with no sequence number yet
        lines.append(f"if (__builtin_expect(r.seq == 0, 0) && {ok}) ResolveFortranReceive(r, {r['status']});")
    if k == "probe":
        lines += matched
    if k in ("create", "creategrp"):
        color = f"*{r['color']}" if "color" in r else "-1"
        key = f"*{r['key']}" if "key" in r else "-1"
        collective = "true" if k == "create" else "false"
        lines.append(f"if ({ok}) CommCreated(r.call, FortranComm(*{r['comm']}), FortranComm(*{r['newcomm']}), "
                     f"{color}, {key}, {collective}, false);")
    if k == "free":
        lines.append(f"if ({ok}) CommFreeing(freed);")
    lines.append("CallEnd(r, *ierr, rec);")
    return "\n".join(lines)


def fortran_completion(c, call, ok):
    """Wait*/Test* from Fortran: the requests made C requests, each status
    read unless MPI_STATUS(ES)_IGNORE."""
    r = c.roles
    n = "1" if "request" in r else f"*{r['nreq']}"
    save = [f"MPI_Request* saved = SaveFortranRequests({n}, {r.get('request', r.get('requests'))});",
            "MPI_Status c_status;"]
    sts = r.get("status", r.get("statuses"))
    return completion_lines(c, save, lambda k: f"FortranStatus({sts}, {k}, &c_status)", True, ok, call,
                            "CallEnd(r, *ierr, rec);")


def fortran_symbols(c):
    """Every name a compiler (or Open MPI's mpi_f08) calls the call by."""
    lower = c.name.lower()
    return [lower + "_", lower, lower + "__", c.name.upper(), "ompi_" + lower[len("mpi_"):] + "_f"]


def fortran_setname(c):
    """MPI_Comm_set_name from Fortran: the name labels the communicator, as
    in C (not recorded as a call)."""
    fn = f"F_{c.name}"
    params = "MPI_Fint* comm, const char* name, MPI_Fint* ierr, size_t name_len"
    out = [f"using {fn}_t = void({params});",
           f"static void {fn}({fn}_t* real, {params}) {{",
           "  real(comm, name, ierr, name_len);",
           "  if (*ierr == MPI_SUCCESS && g_trace && MpiReady()) FortranCommNamed(*comm, name, int(name_len));",
           "}"]
    return out + fortran_entry_points(c, fn, params, "comm, name, ierr, name_len") + [""]


def fortran_entry_points(c, fn, params, args):
    """The exported Fortran names of call `c`, each calling `fn` with the
    real function of that name."""
    out = []
    for s in fortran_symbols(c):
        out += lazy_real(f"void First_{s}({params})", f"{fn}_t*", f"g_realf_{s}", s, f"{{}}({args});")
        out += [f"HT_MPI_EXPORT void HT_MPI_SYMBOL({s})({params}) {{",
                f"  {fn}(__atomic_load_n(&g_realf_{s}, __ATOMIC_ACQUIRE), {args});",
                "}"]
    return out


def generate_fortran(calls):
    # Not for MPICH (HT_MPI_NO_FORTRAN): its Fortran bindings call the C
    # functions, which the C wrappers record.
    out = ["", "// --- Fortran (see gen_wrappers.py) ---", "#if !HT_MPI_NO_FORTRAN", ""]
    for c in calls:
        if not has_fortran(c):
            continue
        if c.kind == "setname":
            out += fortran_setname(c)
            continue
        names, params = fortran_params(c)
        lower = c.name.lower()
        fn = f"F_{c.name}"
        out.append(f"using {fn}_t = void({params});")
        # Inline in each of the call's names: a Fortran call pays for one
        # wrapper's frame, not two (the real function is the names' only
        # difference).
        out.append(f"__attribute__((always_inline)) static inline void {fn}({fn}_t* real, {params}) {{")
        out.append(f"  if (!Tracing()) return real(" + ", ".join(names + ["ierr"]) + ");")
        if c.kind != "start":  # the requests it starts are posted as made by *_init
            assigned = {role for role in c.roles if role in FORTRAN_ROLE} if c.kind != "test" else set()
            out.append("  " + new_record(f"g_mpi_call[{c.index}]", assigned))
        out.append(indent(fortran_body(c)))
        out.append("}")
        out += fortran_entry_points(c, fn, params, ", ".join(names + ["ierr"]))
        out.append("")
    out.append("#endif  // !HT_MPI_NO_FORTRAN")
    return out


def abi_table(calls):
    """OUT_ABI.cc: the exported MPI symbols as trampolines, each jumping to
    the wrapper of the MPI ABI the process turned out to speak (mpi_abi.cc
    decides at the first call): the Open MPI build's, the MPICH build's, or
    for a Fortran name under MPICH, whose bindings call the C functions, the
    next definition (the MPI library's own)."""
    entries = []  # (symbol, has an MPICH wrapper)
    for c in calls:
        entries.append((c.name, True))
    for c in calls:
        if has_fortran(c):
            entries += [(s, False) for s in fortran_symbols(c)]
    out = ["// Generated by interpose/gen_wrappers.py from interpose/mpi.spec. Do not edit.",
           '#include "interpose/mpi_abi.h"',
           "",
           'extern "C" {']
    for name, mpich in entries:
        out.append(f"void ht_ompi_{name}();")
        if mpich:
            out.append(f"void ht_mpich_{name}();")
    out += [f"void ht_mpi_resolve_{i}();" for i in range(len(entries))]
    out.append(f"void* hangtrace_mpi_targets[{len(entries)}] = {{")
    out += [f"    reinterpret_cast<void*>(&ht_mpi_resolve_{i})," for i in range(len(entries))]
    out += ["};", "}  // extern \"C\"", "",
            "namespace hangtrace::mpi_abi {",
            "const Entry kEntries[] = {"]
    for name, mpich in entries:
        target = f"reinterpret_cast<void*>(&ht_mpich_{name})" if mpich else "nullptr"
        out.append(f'    {{"{name}", reinterpret_cast<void*>(&ht_ompi_{name}), {target}}},')
    out += ["};", f"const unsigned kNumEntries = {len(entries)};", "}  // namespace hangtrace::mpi_abi", "",
            "// The exported symbols: one indirect jump each, arguments untouched.",
            "// Until the ABI is known an entry points to its resolver, which",
            "// passes its index to hangtrace_mpi_resolve (mpi_abi.cc).",
            "asm(R\"(", "  .text"]
    for i, (name, _) in enumerate(entries):
        out += [f"  .globl {name}", f"  .type {name}, @function", "  .p2align 4", f"{name}:",
                f"  jmp *hangtrace_mpi_targets+{8 * i}(%rip)", f"  .size {name}, .-{name}",
                f"  .hidden ht_mpi_resolve_{i}", f"  .type ht_mpi_resolve_{i}, @function", f"ht_mpi_resolve_{i}:",
                f"  movl ${i}, %r11d", "  jmp hangtrace_mpi_resolve"]
    out.append(")\");")
    return "\n".join(out) + "\n"


def call_table(calls):
    """OUT.inc: the MPI call table as initializers, for the simulator."""
    out = ["// Generated by interpose/gen_wrappers.py from interpose/mpi.spec. Do not edit.",
           "// {name, op, flags}: the call table the MPI wrappers register."]
    for c in calls:
        out.append(f'{{"{c.name}", fmt::Op::{OPS[c.op]}, uint8_t({c.flags()})}},')
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) == 7 and sys.argv[1] == "gpu":
        read_ops(sys.argv[3])
        return gpu_main(sys.argv[2], sys.argv[4], sys.argv[5], sys.argv[6])
    if len(sys.argv) not in (6, 7) or sys.argv[1] != "mpi":
        sys.exit(__doc__)
    read_ops(sys.argv[3])
    calls = read_spec(sys.argv[2], Call)
    import os
    with open(sys.argv[4], "w") as f:
        f.write(generate(calls, os.path.basename(sys.argv[5])))
    with open(sys.argv[5], "w") as f:
        f.write(call_table(calls))
    if len(sys.argv) == 7:
        with open(sys.argv[6], "w") as f:
            f.write(abi_table(calls))


# --- gpu.spec -------------------------------------------------------------------

GPU_API = {"nccl": "kNccl", "cuda": "kCuda", "hip": "kHip"}
GPU_HEADERS = {
    "nccl": ["<nccl.h>"],
    "cuda": ["<cuda.h>", "<cuda_runtime_api.h>"],
    "hip": ["<hip/hip_runtime_api.h>"],
}
GPU_ROLES = {"comm", "count", "dtype", "redop", "root", "peer", "stream", "newcomm", "func", "cufunc", "cukernel",
             "hipfunc", "grid", "block", "gx", "gy", "gz", "bx", "by", "bz", "cfg", "cucfg"}
# What a wrapper returns when the real function cannot be found at all.
GPU_NOT_FOUND = {
    "ncclResult_t": "ncclSystemError",
    "cudaError_t": "cudaErrorSharedObjectSymbolNotFound",
    "CUresult": "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND",
    "hipError_t": "hipErrorSharedObjectSymbolNotFound",
}


class GpuCall:
    def __init__(self, index, line, by_name):
        fields = [f.strip() for f in line.split("|")]
        if len(fields) != 6:
            raise ValueError(f"expected 'api | name | op | kind | return | parameters': {line}")
        self.index = index
        self.api, self.name, self.op, kind, self.ret, params = fields
        kind = kind.split()
        self.kind, self.ptsz = kind[0], "ptsz" in kind[1:]
        if self.api not in GPU_API:
            raise ValueError(f"{self.name}: unknown api '{self.api}'")
        if self.op not in OPS:
            raise ValueError(f"{self.name}: unknown op '{self.op}'")
        if self.kind not in GPU_KINDS:
            raise ValueError(f"{self.name}: unknown kind '{self.kind}' (gpu.spec's kinds: {sorted(GPU_KINDS)})")
        if self.ret not in GPU_NOT_FOUND:
            raise ValueError(f"{self.name}: unknown return type '{self.ret}'")
        self.base = self.name
        if params.startswith("="):
            base = params[1:].strip()
            if base not in by_name:
                raise ValueError(f"{self.name}: '= {base}' names no earlier line")
            self.base = base
            self.params = by_name[base].params
        else:
            self.params = [Param(p, GPU_ROLES) for p in params.split(",")] if params else []
        self.roles = {p.role: p.name for p in self.params if p.role}

    def flags(self):
        return flags_expr(KINDS[self.kind], self.roles)

    def args(self):
        return ", ".join(p.name for p in self.params)

    def proto(self):
        return ", ".join(p.text for p in self.params) or "void"


GPU_ROLE_CODE = [
    ("comm", "r.comm = NcclComm({});"),
    ("count", "r.count = uint64_t({});"),
    ("dtype", "r.dtype = NcclDtype(int({}));"),
    ("redop", "r.redop = NcclRedop(int({}));"),
    ("root", "r.peer = {};"),
    ("peer", "r.peer = {};"),
    ("stream", "r.handle = uint64_t(uintptr_t({}));"),
    ("func", "r.aux = HostFuncName({});"),
    ("cufunc", "r.aux = CudaFunctionName({});"),
    ("cukernel", "r.aux = CudaKernelName({});"),
    ("hipfunc", "r.aux = HipFunctionName({});"),
    ("grid", "r.count = uint64_t({0}.x) * {0}.y * {0}.z;"),
    ("block", "r.tag = int32_t({0}.x * {0}.y * {0}.z);"),
    ("cfg", "if ({0}) {{\n  r.count = uint64_t({0}->gridDim.x) * {0}->gridDim.y * {0}->gridDim.z;\n"
            "  r.tag = int32_t({0}->blockDim.x * {0}->blockDim.y * {0}->blockDim.z);\n"
            "  r.handle = uint64_t(uintptr_t({0}->stream));\n}}"),
    ("cucfg", "if ({0}) {{\n  r.count = uint64_t({0}->gridDimX) * {0}->gridDimY * {0}->gridDimZ;\n"
              "  r.tag = int32_t({0}->blockDimX * {0}->blockDimY * {0}->blockDimZ);\n"
              "  r.handle = uint64_t(uintptr_t({0}->hStream));\n}}"),
]


def gpu_role_assignments(c):
    out = [code.format(c.roles[role]) for role, code in GPU_ROLE_CODE if role in c.roles]
    if "gx" in c.roles:
        out.append(f"r.count = uint64_t({c.roles['gx']}) * {c.roles['gy']} * {c.roles['gz']};")
    if "bx" in c.roles:
        out.append(f"r.tag = int32_t({c.roles['bx']} * {c.roles['by']} * {c.roles['bz']});")
    if c.ptsz:
        out.append("r.flags |= fmt::kRecPtsz;")
    return out


def hook_decl(c):
    ret = "bool" if c.kind == "poll" else "void"
    params = ", ".join(["fmt::Record& r", f"{c.ret} ret"] + [p.text for p in c.params])
    return f"{ret} After_{c.name}({params})"


def gpu_body(c):
    a = c.args()
    k = c.kind
    device = f"Device::{c.api.capitalize()}"
    call = f"{c.ret} ret = real({a});"
    if k in ("enqcoll", "enqsend", "enqrecv"):
        head = {"enqcoll": "r.seq = NextCollSeq(r.comm);",
                "enqsend": "if (r.peer >= 0) r.seq = NextP2pSeq(r.comm, r.peer, 0, true);",
                "enqrecv": "if (r.peer >= 0) r.seq = NextP2pSeq(r.comm, r.peer, 0, false);"}[k]
        return (f"{head}\nInGroup(r);\nconst Recorded rec = CallBeginOuter(r);\n{call}\n"
                f"if (rec != Recorded::kNo && NcclAccepted(int(ret))) NcclEnqueued(r);\n"
                f"CallEnd(r, int32_t(ret), rec);\nreturn ret;")
    if k == "gstart":
        return f"const Recorded rec = CallBeginOuter(r);\n{call}\nif (ret == 0) GroupOpened();\nCallEnd(r, int32_t(ret), rec);\nreturn ret;"
    if k == "gend":
        return (f"const Recorded rec = CallBeginOuter(r);\n{call}\nGroupClosed(NcclAccepted(int(ret)));\n"
                f"CallEnd(r, int32_t(ret), rec);\nreturn ret;")
    if k in ("hook", "seqhook"):
        head = "r.seq = NextCollSeq(r.comm);\n" if k == "seqhook" else ""
        return (f"{head}const Recorded rec = CallBeginOuter(r);\n{call}\nAfter_{c.name}(r, ret{', ' + a if a else ''});\n"
                f"CallEnd(r, int32_t(ret), rec);\nreturn ret;")
    if k == "poll":
        return (f"{call}\nif (After_{c.name}(r, ret{', ' + a if a else ''})) {{\n"
                f"  const Recorded rec = CallBeginOuter(r);\n  CallEnd(r, r.result, rec);\n}}\nreturn ret;")
    if k == "launch":
        return (f"const Recorded rec = CallBeginOuter(r);\n{call}\nif (rec != Recorded::kNo && ret == 0) Launched(r, {device});\n"
                f"CallEnd(r, int32_t(ret), rec);\nreturn ret;")
    if k == "sync":
        return f"const Recorded rec = CallBeginOuter(r);\n{call}\nCallEnd(r, int32_t(ret), rec);\nreturn ret;"
    raise ValueError(k)


def gpu_generate(calls, api, header_name):
    mine = [c for c in calls if c.api == api]
    out = [
        f"// Generated by interpose/gen_wrappers.py from interpose/gpu.spec ({api}). Do not edit.",
        *[f"#include {h}" for h in GPU_HEADERS[api]],
        f'#include "{header_name}"',
        '#include "interpose/gpu_support.h"',
        "",
        "using namespace hangtrace;",
        "using namespace hangtrace::gpu;",
        "",
        f"static uint16_t g_call[{len(mine)}];",
        f"extern const GpuSymbol k{api.capitalize()}Symbols[{len(mine)}];",
        "",
    ]
    for i, c in enumerate(mine):
        out.append(f"static {c.ret} (*g_real_{c.name})({c.proto()});")
        out.append(f'extern "C" __attribute__((visibility("default"))) {c.ret} {c.name}({c.proto()}) {{')
        out.append(f"  auto real = Real(g_real_{c.name}, k{api.capitalize()}Symbols[{i}]);")
        out.append(f"  if (!real) return {GPU_NOT_FOUND[c.ret]};")
        out.append(f"  if (!Tracing()) return real({c.args()});")
        out.append(f"  fmt::Record r = NewRecord(g_call[{i}]);")
        out += ["  " + l for a in gpu_role_assignments(c) for l in a.split("\n")]
        out.append(indent(gpu_body(c)))
        out.append("}")
        out.append("")
    out.append(f"const GpuSymbol k{api.capitalize()}Symbols[{len(mine)}] = {{")
    for i, c in enumerate(mine):
        out.append(f'    {{"{c.name}", "{c.base}", fmt::Api::{GPU_API[api]}, fmt::Op::{OPS[c.op]}, '
                   f"uint8_t({c.flags()}), {'true' if c.ptsz else 'false'}, "
                   f"reinterpret_cast<void*>(static_cast<{c.ret} (*)({c.proto()})>(&{c.name})), "
                   f"reinterpret_cast<void**>(&g_real_{c.name}), &g_call[{i}]}},")
    out.append("};")
    out.append("")
    out.append(f"void hangtrace::gpu::Know{api.capitalize()}Symbols() {{ KnowSymbols(k{api.capitalize()}Symbols, {len(mine)}); }}")
    return "\n".join(out) + "\n"


def gpu_hooks_header(calls, api):
    mine = [c for c in calls if c.api == api and c.kind in ("hook", "seqhook", "poll")]
    out = [f"// Generated by interpose/gen_wrappers.py from interpose/gpu.spec ({api}). Do not edit.",
           "// The hand-written hooks of the generated wrappers, defined in interpose/gpu_" + api + ".cc.",
           "#pragma once",
           '#include "tracer/format.h"',
           "",
           "namespace hangtrace::gpu {"]
    out += [hook_decl(c) + ";" for c in mine]
    out.append("}  // namespace hangtrace::gpu")
    return "\n".join(out) + "\n"


def gpu_main(spec, api, out_cc, out_h):
    if api not in GPU_API:
        sys.exit(f"unknown api '{api}' (nccl, cuda or hip)")
    calls = read_spec(spec, GpuCall)
    import os
    with open(out_h, "w") as f:
        f.write(gpu_hooks_header(calls, api))
    with open(out_cc, "w") as f:
        f.write(gpu_generate(calls, api, os.path.basename(out_h)))


if __name__ == "__main__":
    main()
