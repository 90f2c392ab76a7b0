"""hangtrace's Python hook, run by every Python started under `hangtrace run`
(which puts this folder first on PYTHONPATH; HANGTRACE_TORCH=0 leaves it
off). It arms hangtrace_torch, which records torch.distributed's calls once
the program imports it, then runs the sitecustomize that Python would have
run without us (Debian's, a virtualenv's, the program's own), so nothing
the program expects at start-up is lost. Any failure here is said in one
line and the program runs untraced: the traced job is never harmed."""
import os
import sys


def _arm():
    # torch needs Python 3.6 or later; an older Python (2.7's imports know
    # no find_spec) is left as it is.
    if os.environ.get("HANGTRACE_TORCH", "1") == "0" or sys.version_info < (3, 6):
        return
    try:
        import hangtrace_torch
        hangtrace_torch.install()
    except Exception as e:  # never stop the program
        sys.stderr.write("hangtrace: torch.distributed calls are not traced: %s\n" % e)


def _chain():
    """Imports the next sitecustomize on sys.path, as if ours were not there."""
    here = os.path.dirname(os.path.abspath(__file__))
    ours = sys.modules.pop("sitecustomize", None)
    # Our folder leaves sys.path for good: the program's imports never see it.
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        import importlib
        importlib.import_module("sitecustomize")
    except ImportError as e:
        # (Python 2's ImportError has no name: its message says which)
        if getattr(e, "name", None) != "sitecustomize" and str(e) != "No module named sitecustomize":
            sys.stderr.write("hangtrace: the program's sitecustomize failed: %s\n" % e)
        sys.modules["sitecustomize"] = ours  # there is none: ours stands
    except Exception as e:  # as Python's site.py does: said, and start-up goes on
        sys.stderr.write("hangtrace: the program's sitecustomize failed: %s\n" % e)


_arm()
_chain()
