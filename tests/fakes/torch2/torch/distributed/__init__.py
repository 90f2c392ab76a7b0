"""FAKE torch.distributed (2.x layout): re-exports distributed_c10d."""
from .distributed_c10d import *  # noqa: F401,F403
