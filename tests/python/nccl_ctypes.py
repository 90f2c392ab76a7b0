"""NCCL and the CUDA runtime loaded by dlopen from Python (RTLD_LOCAL, the
way ctypes and framework extensions load them, after start-up), then one
all-reduce on a one-rank communicator. Run with the FAKE libraries of
tests/fakes on LD_LIBRARY_PATH; under hangtrace the calls must be traced.

  python3 nccl_ctypes.py
"""
import ctypes

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
check("ncclAllReduce", nccl.ncclAllReduce(buf, buf, ctypes.c_size_t(64), NCCL_FLOAT, NCCL_SUM, comm, stream))
check("cudaStreamSynchronize", cudart.cudaStreamSynchronize(stream))
check("ncclCommDestroy", nccl.ncclCommDestroy(comm))
print("ok", flush=True)
