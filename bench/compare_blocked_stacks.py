#!/usr/bin/env python3
"""Compares two dumps of one job (bench/bench_blocked_stacks.sh): A taken the
default way (blocked threads read from their stack pointer and pc), B with
--stop-all (every thread from all its registers). Prints one line: the
threads blocked in the same call at both looks, and how A's stacks compare
with B's."""
import glob
import json
import sys


def threads(folder):
    out = {}
    for path in glob.glob(folder + "/*/node.json"):
        node = json.load(open(path))
        stacks = node.get("stacks", [])
        for p in node["processes"]:
            for t in p["threads"]:
                frames = stacks[t["stack"]] if "stack" in t else []
                key = [(f.get("module", ""), f.get("offset", 0), f.get("func", "")) for f in frames
                       if f.get("lang", "native") == "native"]
                out[(p["pid"], t["tid"])] = (t, key)
    return out


name, a_dir, b_dir = sys.argv[1:4]
a, b = threads(a_dir), threads(b_dir)
blocked = same = shorter = other = scanned = 0
for k, (ta, fa) in a.items():
    if ta.get("method") != "blocked" or k not in b:
        continue
    tb, fb = b[k]
    if tb.get("syscall") != ta.get("syscall") or not fb:
        continue  # moved between the looks
    blocked += 1
    if fa == fb:
        same += 1
        scanned += bool(ta.get("frame_pointer_scan"))
    elif fa == fb[:len(fa)]:
        shorter += 1
    else:
        other += 1
print(f"{name:22s} {blocked:8d} {same:6d} {shorter:8d} {other:6d} {scanned:8d}")
