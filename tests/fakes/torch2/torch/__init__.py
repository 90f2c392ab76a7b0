"""A FAKE of torch 2.x, as much as hangtrace's Python hook reads: dtypes and
tensors with numel(). Not torch: tests/python/torch2_api.py runs the hook
on it, because Debian 12 ships torch 1.13 only."""


class dtype(object):
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "torch." + self.name


float32 = dtype("float32")
bfloat16 = dtype("bfloat16")
int64 = dtype("int64")


class Tensor(object):
    def __init__(self, n, dt=float32):
        self._n, self.dtype = n, dt

    def numel(self):
        return self._n


class _Compiler(object):
    """torch.compiler: is_compiling() is True while torch.compile traces."""
    compiling = False

    def is_compiling(self):
        return self.compiling


compiler = _Compiler()
