"""NCCL and the CUDA runtime loaded by dlopen from Python (RTLD_LOCAL, the
way ctypes and framework extensions load them, after start-up), then one
all-reduce on a one-rank communicator. Run with the FAKE libraries of
tests/fakes on LD_LIBRARY_PATH; under hangtrace the calls must be traced.

  python3 nccl_ctypes.py [framework]

With `framework`, the all-reduce is issued inside a call recorded through
hangtrace's C API as its torch.distributed hook records one (a process
group of one rank, `dist.all_reduce`): what ProcessGroupNCCL does on the
calling thread.
"""
import ctypes
import sys

cudart = ctypes.CDLL("libcudart.so.13", mode=ctypes.RTLD_LOCAL)
nccl = ctypes.CDLL("libnccl.so.2", mode=ctypes.RTLD_LOCAL)


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


def check(what, rc):
    if rc != 0:
        raise SystemExit("%s failed: %d" % (what, rc))


uid = UniqueId()
check("ncclGetUniqueId", nccl.ncclGetUniqueId(ctypes.byref(uid)))
comm = ctypes.c_void_p()
check("ncclCommInitRank", nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0))
buf = ctypes.c_void_p()
check("cudaMalloc", cudart.cudaMalloc(ctypes.byref(buf), ctypes.c_size_t(64 * 4)))
stream = ctypes.c_void_p()
check("cudaStreamCreate", cudart.cudaStreamCreate(ctypes.byref(stream)))
NCCL_FLOAT, NCCL_SUM = 7, 0
framework = len(sys.argv) > 1 and sys.argv[1] == "framework"
if framework:
    ht = ctypes.CDLL(None)
    ht.hangtrace_comm_register.argtypes = [ctypes.c_uint64, ctypes.c_char_p, ctypes.c_int, ctypes.c_int,
                                           ctypes.POINTER(ctypes.c_int32)]
    ht.hangtrace_call_begin.argtypes = [ctypes.c_int] * 4 + [ctypes.c_uint64, ctypes.c_int, ctypes.c_int,
                                                             ctypes.c_uint64]
    call = ht.hangtrace_call_register(b"dist.all_reduce", 6, 1, 1 | 32)  # torch, allreduce, collective|blocking
    group = ht.hangtrace_comm_register(0x70726f63, b"default_pg", 1, 0, (ctypes.c_int32 * 1)(0))
    check("hangtrace_call_begin", ht.hangtrace_call_begin(call, group, -1, 0, 64, 11, 1, 0))
check("ncclAllReduce", nccl.ncclAllReduce(buf, buf, ctypes.c_size_t(64), NCCL_FLOAT, NCCL_SUM, comm, stream))
if framework:
    check("hangtrace_call_end", ht.hangtrace_call_end(0, -1, -1))
check("cudaStreamSynchronize", cudart.cudaStreamSynchronize(stream))
check("ncclCommDestroy", nccl.ncclCommDestroy(comm))
print("ok", flush=True)
