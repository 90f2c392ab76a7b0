"""A Python program that hangs where its test expects it, on any CPython 3.6+
and without mpi4py: the main thread enters an annotated hangtrace region
(so the watchdog has a call in flight) and blocks forever in wait_for_data;
a second thread sleeps in a loop in prefetch. Lines marked with a comment
"# at: NAME" are where each thread is; the test reads them from this file.

  python frames_prog.py
"""
import ctypes
import os
import sys
import threading
import time


def prefetch(stop):
    while not stop.is_set():
        time.sleep(0.05)  # at: prefetch


def wait_for_data(event):
    event.wait()  # at: wait_for_data


def train_step(lib, region):
    lib.hangtrace_begin(region, ctypes.c_uint64(7))
    wait_for_data(threading.Event())  # at: train_step
    lib.hangtrace_end(region)


def main():
    lib = ctypes.CDLL(None)  # libhangtrace.so is preloaded into the process
    if not hasattr(lib, "hangtrace_begin"):
        sys.exit("frames_prog.py: run it under hangtrace run")
    region = lib.hangtrace_region(b"train_step")
    stop = threading.Event()
    threading.Thread(target=prefetch, args=(stop,), name="prefetch", daemon=True).start()
    print("ready", os.getpid(), flush=True)
    train_step(lib, region)  # at: main


main()  # at: module
