"""Times hangtrace's in-process stack capture in a Python process: THREADS
threads parked in Python functions (5 frames deep) plus the main thread;
ROUNDS captures through the C API (hangtrace_capture_stacks), each one every
thread's native stack and, with HANGTRACE_PYTHON=1, every thread's Python
frames by CPython's dumper. Prints the median microseconds per capture.

  hangtrace run -- python3 bench/python_capture.py THREADS ROUNDS
"""
import ctypes
import statistics
import sys
import threading
import time

threads, rounds = int(sys.argv[1]), int(sys.argv[2])
lib = ctypes.CDLL(None)
stop = threading.Event()


def level(n):
    if n == 0:
        stop.wait()
    else:
        level(n - 1)


for _ in range(threads):
    threading.Thread(target=level, args=(4,), daemon=True).start()
time.sleep(0.2)
times = []
for _ in range(rounds):
    t0 = time.perf_counter()
    answered = lib.hangtrace_capture_stacks()
    times.append(time.perf_counter() - t0)
stop.set()
print("threads %d answered %d median_us %.1f" % (threads + 1, answered, statistics.median(times) * 1e6))
