"""Records torch.distributed's calls in the process's hangtrace trace file.

torch.distributed on gloo calls neither MPI nor NCCL, so the preloaded
wrappers see nothing of it; on NCCL they see the NCCL calls but not which
torch call and process group issued them. This module wraps the functions
of torch.distributed (installed by sitecustomize when the program imports
it) and records each call through the C API of the preloaded library
(include/hangtrace.h), as the MPI wrappers record MPI's:

- the process group is the communicator: one id on every member (from the
  group's name, which torch gives in creation order, and its global ranks),
  labelled like the program's groups where a name is known (torch's default
  group "default_pg", a group's description, Megatron's and DeepSpeed's
  group variables), else the analyzer names it by its members;
- a sequence number per group (collectives) or per (group, peer, tag)
  (send/recv), the op, element count, dtype, reduction and root or peer;
- async_op=True, isend and irecv post the call; it ends when its work is
  waited on (Work.wait, recorded as the waiting call), found completed, or
  when the future get_future() gave completes (DDP's comm hooks).

A call made inside another (broadcast_object_list's broadcasts) is part of
it and not recorded again, so every rank counts its calls alike. Calls that
torch makes from C++ (DistributedDataParallel's gradient all-reduces) do
not pass here; the stacks show them. Nothing here may harm the program:
each wrapper calls the real function exactly once with the same arguments,
and a failure of the bookkeeping is said once and the call goes untraced.

The record path of each call runs in C++ (_hangtrace_torch, built beside
this file for one Python version): a wrapper there reads the arguments at
the positions _wrap locates here, and calls this module's functions for
what is rare (a group seen the first time, a posted call's work). Where it
cannot load (another Python version, not built), one line says so and the
same calls are recorded through the Python wrappers below and ctypes, a
few microseconds slower each; HANGTRACE_TORCH=ctypes chooses them.
"""
import collections
import ctypes
import functools
import hashlib
import inspect
import itertools
import os
import sys
import threading
import weakref

# Values of the trace format (tracer/format.h).
_API_TORCH = 6
_OP = {"allreduce": 1, "bcast": 2, "reduce": 3, "allgather": 4, "reducescatter": 5, "alltoall": 6,
       "gather": 7, "scatter": 8, "barrier": 9, "send": 11, "recv": 12, "wait": 14}
_COLLECTIVE, _P2P, _ROOTED, _NONBLOCKING, _COMPLETION, _BLOCKING = 1, 2, 4, 8, 16, 32
_ANY_PEER = -2
_DTYPES = {"int8": 1, "uint8": 2, "int16": 3, "int32": 5, "int64": 7, "float16": 9, "bfloat16": 10,
           "float32": 11, "float64": 12, "bool": 15, "float8_e4m3fn": 16, "float8_e5m2": 17}
_REDOPS = (("SUM", 1), ("PRODUCT", 2), ("MAX", 3), ("MIN", 4), ("AVG", 5), ("BAND", 6), ("BOR", 7),
           ("BXOR", 8))

# The one table: each function recorded, its op, the parameter naming its
# root (collectives) or peer (send/recv), and the one holding its data.
CALLS = (
    ("all_reduce", "allreduce", None, "tensor"),
    ("all_reduce_coalesced", "allreduce", None, "tensors"),
    ("broadcast", "bcast", "src", "tensor"),
    ("reduce", "reduce", "dst", "tensor"),
    ("all_gather", "allgather", None, "tensor"),
    ("all_gather_coalesced", "allgather", None, "input_tensor_list"),
    ("all_gather_into_tensor", "allgather", None, "input_tensor"),
    ("_all_gather_base", "allgather", None, "input_tensor"),
    ("reduce_scatter", "reducescatter", None, "output"),
    ("reduce_scatter_tensor", "reducescatter", None, "output"),
    ("_reduce_scatter_base", "reducescatter", None, "output"),
    ("all_to_all", "alltoall", None, "input_tensor_list"),
    ("all_to_all_single", "alltoall", None, "input"),
    ("gather", "gather", "dst", "tensor"),
    ("scatter", "scatter", "src", "tensor"),
    ("barrier", "barrier", None, None),
    ("monitored_barrier", "barrier", None, None),
    ("all_gather_object", "allgather", None, None),
    ("broadcast_object_list", "bcast", "src", "object_list"),
    ("gather_object", "gather", "dst", None),
    ("scatter_object_list", "scatter", "src", None),
    ("send", "send", "dst", "tensor"),
    ("recv", "recv", "src", "tensor"),
    ("isend", "send", "dst", "tensor"),
    ("irecv", "recv", "src", "tensor"),
)
_POSTING = ("isend", "irecv")  # always nonblocking
# Blocking calls that wait on no Work of torch's: a failure of theirs is
# never read as a refusal before issuing (_end_failed).
_NO_WORK = ("monitored_barrier",)
_TARGET = "torch.distributed.distributed_c10d"
# Where programs keep their groups: module -> its globals named like "_TENSOR_MODEL_PARALLEL_GROUP".
_GROUP_MODULES = ("megatron.core.parallel_state", "megatron.mpu.initialize", "megatron.core.mpu",
                  "megatron.mpu", "deepspeed.utils.groups")

_lib = None
_begin = None  # _lib.hangtrace_call_begin, looked up once
_ext = None    # _hangtrace_torch, the record path in C++; None: the Python wrappers and ctypes
_compiling = None  # torch.compiler.is_compiling (2.3+): while torch.compile
                   # traces a function, the hook stands aside (no graph break)
_c10d = None
_tls = threading.local()
_groups = {}     # process group -> _Group, or None where this rank is no member
_calls = {}      # (name, nonblocking) -> call id
_posted = {}     # id(Work) -> (weakref to it, handle, group, source is any): see _post
_handles = itertools.count(1)
_lock = threading.Lock()
_warned = []
_inits = 0       # init_process_group calls that returned: a group's id names the one it belongs to


def _warn(what, e):
    if not _warned:
        _warned.append(what)
        sys.stderr.write("hangtrace: torch.distributed %s not traced: %s: %s\n" % (what, type(e).__name__, e))


# A process group's communicator index, and its ranks by global rank (a
# tuple: _hangtrace_torch reads its items).
_Group = collections.namedtuple("_Group", ("comm", "index_of"))


def _load_library():
    lib = ctypes.CDLL(None)  # the preloaded library is in the global scope
    try:
        lib.hangtrace_call_begin
    except AttributeError:
        return None
    u64, i32 = ctypes.c_uint64, ctypes.c_int
    lib.hangtrace_call_register.argtypes = [ctypes.c_char_p, i32, i32, ctypes.c_uint]
    lib.hangtrace_comm_register.argtypes = [u64, ctypes.c_char_p, i32, i32, ctypes.POINTER(ctypes.c_int32)]
    lib.hangtrace_comm_free.argtypes = [i32]
    lib.hangtrace_set_rank.argtypes = [i32, i32]
    lib.hangtrace_call_begin.argtypes = [i32, i32, i32, i32, u64, i32, i32, u64]
    lib.hangtrace_call_end.argtypes = [i32, i32, i32]
    lib.hangtrace_request_end.argtypes = [u64, i32, i32]
    try:  # a library older than the hook ends refused calls as failed ones
        lib.hangtrace_request_not_issued.argtypes = [u64]
        lib.hangtrace_call_not_issued.argtypes = []
    except AttributeError:
        pass
    return lib


def _call_id(name, op, flags):
    key = (name, flags)
    cid = _calls.get(key)
    if cid is None:
        with _lock:
            cid = _calls.get(key)
            if cid is None:
                cid = _lib.hangtrace_call_register(name.encode(), _API_TORCH, _OP[op], flags)
                _calls[key] = cid
    return cid


def _group_name(pg):
    for get in (lambda: pg.group_name, lambda: _c10d._pg_names[pg], lambda: _c10d._world.pg_names[pg]):
        try:
            name = get()
            if name:
                return str(name)
        except Exception:
            pass
    return ""


def _label(pg, default):
    if pg is default:
        return "default_pg"
    desc = getattr(pg, "group_desc", None)  # torch 2.4+: new_group(group_desc=...)
    if isinstance(desc, str) and desc and desc != "undefined":
        return desc
    for name in _GROUP_MODULES:
        module = sys.modules.get(name)
        for var, value in (vars(module).items() if module else ()):
            if value is pg and var.endswith("_GROUP"):
                return var.strip("_")[:-len("_GROUP")].lower()
    return ""


def _register(pg):
    """The group's communicator entry (None: this rank is no member, or the
    file's communicator table is full: its calls pass untraced)."""
    default = _c10d._get_default_group()
    if pg is not default and default not in _groups:
        _group_of(default)  # first: it gives the process its rank
    members = [int(r) for r in _c10d.get_process_group_ranks(pg)]
    me = _c10d.get_rank()
    if me not in members:
        return None
    # After destroy_process_group and a new init, torch names the groups as
    # before: the init they follow tells them apart (every rank inits as
    # often), else the new default group's calls were matched with the old one's.
    text = "torch|%d|%s|%s" % (_inits, _group_name(pg), ",".join(map(str, members)))
    gid = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") or 1
    arr = (ctypes.c_int32 * len(members))(*members)
    label = _label(pg, default)
    if label and _inits > 1:
        label += " (init %d)" % _inits
    comm = _lib.hangtrace_comm_register(gid, label.encode()[:47], len(members), members.index(me), arr)
    if comm < 0:
        return None
    if pg is default:
        _lib.hangtrace_set_rank(me, len(members))
    return _Group(comm, {g: i for i, g in enumerate(members)})


def _group_of(pg):
    if pg is None:
        pg = _c10d._get_default_group()
    elif pg is getattr(_c10d.GroupMember, "NON_GROUP_MEMBER", None):
        return None  # a group this rank is not in: torch returns at once
    try:
        return _groups[pg]
    except KeyError:
        g = _groups[pg] = _register(pg)
        return g


_dtype_codes = {}  # torch.dtype -> Dtype, filled at patch()
_redop_codes = {}  # ReduceOp value -> Redop, filled as seen


def _numel_dtype(data):
    if data.__class__ in (list, tuple):
        if not data:
            return 0, 0
        if not hasattr(data[0], "numel"):
            return len(data), 0  # a list of objects
        data = data[0]
    dtype = getattr(data, "dtype", None)
    if dtype is None:
        return 0, 0
    return data.numel(), _dtype_codes.get(dtype, 255)


def _redop(op):
    try:
        return _redop_codes[op]
    except (KeyError, TypeError):
        pass
    value = 255
    kinds = getattr(_c10d.ReduceOp, "RedOpType", None)  # ReduceOp.RedOpType.MAX (and reduce_op.MAX) run as MAX
    for name, code in _REDOPS:
        for known in (_c10d.ReduceOp, kinds):
            try:  # (comparing a RedOpType with a ReduceOp raises on some versions)
                if known is not None and op == getattr(known, name):
                    value = code
            except Exception:
                pass
        if value != 255:
            break
    try:
        _redop_codes[op] = value
    except TypeError:  # not hashable: looked up each time
        pass
    return value


def _wrap(fn_name, op, peer_param, data_param, real):
    """The wrapper of one call. What it must find in the arguments (group,
    async_op, peer or root, tag, data, reduction) is located once, here:
    per call it is an index into args or a dict lookup, so the hook costs a
    few microseconds next to a collective's tens to thousands."""
    params = list(inspect.signature(real).parameters.values())
    names = [p.name for p in params]
    defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}

    def where(name):
        return names.index(name) if name and name in names else 1 << 30

    keys = ("group", "async_op", peer_param, "tag", data_param, "op")
    group_at, async_at, peer_at, tag_at, data_at, op_at = positions = tuple(where(n) for n in keys)
    group_default, async_default = defaults.get("group"), defaults.get("async_op", False)
    peer_default, tag_default, op_default = defaults.get(peer_param), defaults.get("tag", 0), defaults.get("op")
    p2p = op in ("send", "recv")
    rooted = peer_param is not None and not p2p
    has_op, has_data = "op" in names, data_param is not None and data_param in names
    base = (_P2P if p2p else _COLLECTIVE) | (_ROOTED if rooted else 0)
    always_posting = fn_name in _POSTING
    waits_on_work = fn_name not in _NO_WORK
    blocking_name = "dist." + fn_name.lstrip("_")
    posting_name = blocking_name + ("" if always_posting else " async")
    if _ext is not None:
        call = _ext.call(real, blocking_name, posting_name, op, base | _BLOCKING, base | _NONBLOCKING,
                         always_posting, peer_param is not None, p2p, has_data, has_op, waits_on_work,
                         positions, keys,
                         (group_default, async_default, peer_default, tag_default, None, op_default),
                         "group_" + peer_param if peer_param else None)
        # A Python function in front (about 0.1 us), as torch's own is: what
        # introspects it (inspect.isfunction, help, weakref, mock's autospec)
        # finds a function, and torch.compile, which cannot look inside the C
        # callable, traces through to torch's function while it compiles.
        if _compiling is None:
            def wrapper(*args, **kwargs):
                return call(*args, **kwargs)
        else:
            def wrapper(*args, **kwargs):
                if _compiling():
                    return real(*args, **kwargs)
                return call(*args, **kwargs)
        functools.update_wrapper(wrapper, real)
        wrapper.__hangtrace__ = True
        return wrapper
    ids = {}  # posting -> call id

    def begin(args, kwargs):
        n = len(args)
        posting = always_posting or bool(args[async_at] if async_at < n else kwargs.get("async_op", async_default))
        group = _group_of(args[group_at] if group_at < n else kwargs.get("group", group_default))
        if group is None:
            return None  # this rank is no member: torch returns at once
        peer, tag = -1, 0
        if peer_param:
            group_peer = kwargs.get("group_" + peer_param) if kwargs else None  # torch 2.6+: group_src/group_dst
            if group_peer is not None:
                peer = int(group_peer)
            else:
                global_peer = args[peer_at] if peer_at < n else kwargs.get(peer_param, peer_default)
                peer = _ANY_PEER if global_peer is None else group.index_of.get(int(global_peer), -1)
        if p2p:
            tag = int((args[tag_at] if tag_at < n else kwargs.get("tag", tag_default)) or 0)
        count, dtype = _numel_dtype(args[data_at] if data_at < n else kwargs.get(data_param)) if has_data else (0, 0)
        redop = _redop(args[op_at] if op_at < n else kwargs.get("op", op_default)) if has_op else 0
        cid = ids.get(posting)
        if cid is None:
            flags = base | (_NONBLOCKING if posting else _BLOCKING)
            cid = ids[posting] = _call_id(posting_name if posting else blocking_name, op, flags)
        handle = next(_handles) if posting else 0
        if _begin(cid, group.comm, peer, tag, count, dtype, redop, handle) < 0:
            return None
        return posting, handle, group, peer == _ANY_PEER

    @functools.wraps(real)
    def wrapper(*args, **kwargs):
        if getattr(_tls, "inside", False) or (_compiling is not None and _compiling()):
            return real(*args, **kwargs)
        unrecorded = None  # why this call could not be recorded: said once the call succeeds
        try:
            rec = begin(args, kwargs)
        except Exception as e:
            unrecorded, rec = e, None
        waits_before = getattr(_tls, "waits", 0)
        _tls.inside = True
        try:
            ret = real(*args, **kwargs)
        except BaseException:
            if rec is not None:
                # Refused before torch issued it: a posted call raises only
                # then; a blocking one, when it waited on no work.
                refused = rec[0] or (waits_on_work and getattr(_tls, "waits", 0) == waits_before)
                _end_failed(rec, refused)
            raise
        finally:
            _tls.inside = False
        if unrecorded is not None:  # (where torch rejects the call too, its error is the one to see)
            _warn("calls are", unrecorded)
        if rec is not None:
            posting, handle, group, any_source = rec
            if not posting:
                # recv from any source returns the sender's global rank.
                source = group.index_of.get(ret, -1) if any_source and isinstance(ret, int) else -1
                _lib.hangtrace_call_end(0, source, -1)
            elif ret is None:
                _lib.hangtrace_request_end(handle, -1, -1)
            else:
                _post(ret, (handle, group, any_source))
        return ret

    wrapper.__hangtrace__ = True
    return wrapper


def _end_failed(rec, refused):
    """Ends a call that raised: as refused before it was issued (it gives
    back its sequence number: the other ranks never saw it), or as failed."""
    posting, handle = rec[0], rec[1]
    if refused and hasattr(_lib, "hangtrace_call_not_issued"):
        if posting:
            _lib.hangtrace_request_not_issued(handle)
        else:
            _lib.hangtrace_call_not_issued()
    elif posting:
        _lib.hangtrace_request_end(handle, -1, -1)
    else:
        _lib.hangtrace_call_end(1, -1, -1)


def _post(work, entry):
    """Remembers a posted call's work until it ends. Weakly: a work the
    program drops unfinished (a DDP comm hook keeps only its future) must
    not keep its tensors alive; its post then stays open, which is the
    truth as far as anyone can tell. (A dict's get, set and pop are atomic
    under the GIL: no lock on these paths, which every blocking torch call
    also takes through its own work.wait().)"""
    key = id(work)

    def forget(ref, key=key):
        cur = _posted.get(key)
        if cur is not None and cur[0] is ref:
            _posted.pop(key, None)

    try:
        _posted[key] = (weakref.ref(work, forget),) + entry
    except TypeError:  # no weak references to it: ends now, as far as we can tell
        _lib.hangtrace_request_end(entry[0], -1, -1)


def _take(work):
    """The posted call of `work` (its entry), taken; None if none."""
    if not _posted:
        return None
    cur = _posted.get(id(work))
    if cur is None or cur[0]() is not work:
        return None
    _posted.pop(id(work), None)
    return cur[1:]


def _end_posted(work, entry):
    handle, group, any_source = entry
    source = -1
    if any_source:
        try:
            # torch's own recv() asks _source_rank(); source_rank() prints a
            # deprecation warning the untraced program never shows.
            of = getattr(work, "_source_rank", None) or work.source_rank
            source = group.index_of.get(int(of()), -1)
        except Exception:
            pass
    _lib.hangtrace_request_end(handle, source, -1)


def _wrap_work(work_class):
    """A posted call ends when its work is waited on (recorded as the
    waiting call), found completed, or, through get_future() (DDP's comm
    hooks), when its future completes."""
    real_wait = work_class.wait
    real_is_completed = getattr(work_class, "is_completed", None)
    real_get_future = getattr(work_class, "get_future", None)

    @functools.wraps(real_wait)
    def wait(self, *args, **kwargs):
        if getattr(_tls, "inside", False):  # torch waits inside a wrapped call: it issued it
            _tls.waits = getattr(_tls, "waits", 0) + 1
        entry = _take(self)
        if entry is None:
            return real_wait(self, *args, **kwargs)
        cid = _call_id("dist.Work.wait", "wait", _COMPLETION | _BLOCKING)
        recorded = _lib.hangtrace_call_begin(cid, -1, -1, 0, 1, 0, 0, entry[0]) >= 0
        try:
            ret = real_wait(self, *args, **kwargs)
        except BaseException:
            if recorded:
                _lib.hangtrace_call_end(1, -1, -1)
            _post(self, entry)  # not completed
            raise
        if recorded:
            _lib.hangtrace_call_end(0, -1, -1)
        _end_posted(self, entry)
        return ret

    if _ext is not None:  # while nothing is posted (every blocking call), the real wait at once
        wait = functools.update_wrapper(_ext.method(real_wait, wait), real_wait)
    work_class.wait = wait
    if real_is_completed is not None:
        @functools.wraps(real_is_completed)
        def is_completed(self):
            done = real_is_completed(self)
            if done:
                entry = _take(self)
                if entry is not None:
                    _end_posted(self, entry)
            return done

        work_class.is_completed = is_completed
    if real_get_future is not None:
        @functools.wraps(real_get_future)
        def get_future(self):
            future = real_get_future(self)
            entry = _take(self)
            if entry is not None:
                try:
                    # Runs on the thread that completes it (at once if done).
                    future.add_done_callback(lambda _, work=self, entry=entry: _end_posted(work, entry))
                except Exception:
                    _post(self, entry)
            return future

        work_class.get_future = get_future


def _wrap_destroy(real):
    @functools.wraps(real)
    def destroy_process_group(group=None, *args, **kwargs):
        try:
            with _lock:
                gone = list(_groups) if group is None else [group]
                for pg in gone:
                    g = _groups.pop(pg, None)
                    if g is not None:
                        _lib.hangtrace_comm_free(g.comm)
                if _ext is not None:
                    _ext.forget_default_group()
        except Exception as e:
            _warn("groups are", e)
        return real(group, *args, **kwargs)

    destroy_process_group.__hangtrace__ = True
    return destroy_process_group


def _wrap_init(real):
    """init_process_group: once it returns, the default group gives the
    process its rank (hangtrace_set_rank), and the runtime knows the
    process has started: a rank blocked from then on with no traced call
    of its own (DDP's all-reduces come from C++) gets the automatic report;
    one still in the rendezvous does not."""
    @functools.wraps(real)
    def init_process_group(*args, **kwargs):
        global _inits
        result = real(*args, **kwargs)
        _inits += 1
        try:
            _group_of(None)
        except Exception as e:
            _warn("groups are", e)
        return result

    init_process_group.__hangtrace__ = True
    return init_process_group


def patch(module):
    """Wraps the calls of torch.distributed.distributed_c10d, before
    torch.distributed re-exports them."""
    global _c10d, _compiling, _ext
    _c10d = module
    import torch
    _compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    for name, code in _DTYPES.items():
        dtype = getattr(torch, name, None)
        if dtype is not None:
            _dtype_codes[dtype] = code
    _ext = _load_extension()
    for fn_name, op, peer_param, data_param in CALLS:
        real = getattr(module, fn_name, None)
        if real is None or getattr(real, "__hangtrace__", False):
            continue
        setattr(module, fn_name, _wrap(fn_name, op, peer_param, data_param, real))
    real = getattr(module, "destroy_process_group", None)
    if real is not None and not getattr(real, "__hangtrace__", False):
        module.destroy_process_group = _wrap_destroy(real)
    real = getattr(module, "init_process_group", None)
    if real is not None and not getattr(real, "__hangtrace__", False):
        module.init_process_group = _wrap_init(real)
    work = getattr(module, "Work", None)
    if work is not None and not getattr(work.wait, "__wrapped__", None):
        _wrap_work(work)


def _load_extension():
    """_hangtrace_torch, armed; None where it cannot load, said in one line
    (the calls are then recorded through ctypes). It is loaded by its path:
    sitecustomize took this folder off sys.path."""
    if os.environ.get("HANGTRACE_TORCH") == "ctypes":
        return None
    import importlib.machinery
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        paths = [os.path.join(here, "_hangtrace_torch" + s) for s in importlib.machinery.EXTENSION_SUFFIXES]
        path = next((p for p in paths if os.path.exists(p)), None)
        if path is None:
            raise ImportError("none built for Python %d.%d in %s" % (sys.version_info[:2] + (here,)))
        loader = importlib.machinery.ExtensionFileLoader("_hangtrace_torch", path)
        ext = importlib.util.module_from_spec(importlib.util.spec_from_file_location("_hangtrace_torch", path,
                                                                                      loader=loader))
        loader.exec_module(ext)
        ext.setup(_groups, _group_of, _dtype_codes, _redop_codes, _redop, _call_id, _post, _posted, _warn,
                  getattr(_c10d.GroupMember, "NON_GROUP_MEMBER", object()))
        return ext
    except Exception as e:
        sys.stderr.write("hangtrace: torch.distributed calls are recorded through ctypes, a few microseconds "
                         "slower each: _hangtrace_torch did not load: %s: %s\n" % (type(e).__name__, e))
        return None


class _Loader(object):
    """The real loader of distributed_c10d, then patch()."""

    def __init__(self, real):
        self._real = real

    def create_module(self, spec):
        return self._real.create_module(spec)

    def exec_module(self, module):
        self._real.exec_module(module)
        try:
            patch(module)
        except Exception as e:
            _warn("calls are", e)

    def __getattr__(self, name):
        return getattr(self._real, name)


class _Finder(object):
    """Finds nothing itself: when distributed_c10d is imported, the spec the
    other finders give, with its loader wrapped."""

    def find_spec(self, fullname, path, target=None):
        if fullname != _TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


def install():
    """Arms the hook (a no-op where the preloaded library is not there)."""
    global _lib
    if _lib is not None:
        return
    _lib = _load_library()
    if _lib is None:
        return
    global _begin
    _begin = _lib.hangtrace_call_begin
    module = sys.modules.get(_TARGET)
    if module is not None:
        patch(module)  # imported already: its re-exports are torch's own
    else:
        sys.meta_path.insert(0, _Finder())
