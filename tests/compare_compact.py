#!/usr/bin/env python3
"""Whether a compact dump of a job gives the diagnosis the whole files give.

    compare_compact.py HANGTRACE DIR JOB

Waits until no process of the job is alive (the files must not change
between the two dumps), dumps the job's trace files under DIR twice, whole
(--full) and compact (the default), with no stacks (the files are what
differs), analyzes both and compares the JSON reports, the folder names and
the times aside. Exit 0: the same; 1: they
differ (the difference is printed); 2: could not compare. Used by
scripts/accuracy.sh and tests/mpi/generated/run_catalogue.py on every case.
"""
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def timeless(v, key=""):
    """The report without the times that depend on when it was dumped (two
    dumps are some ms apart): durations, ages, clock times."""
    if isinstance(v, dict):
        return {k: timeless(x, k) for k, x in v.items()}
    if isinstance(v, list):
        return [timeless(x, key) for x in v]
    if isinstance(v, float) or (isinstance(v, int) and re.search(r"(_s|_ns|seconds|age|_at)$", key)):
        return "TIME"
    if isinstance(v, str):
        v = re.sub(r"\d+(\.\d+)?( to \d+(\.\d+)?)? (s|ms|min)\b", "T", v)
        return re.sub(r"\d\d:\d\d:\d\d(\.\d+)?", "HH:MM:SS", v)
    return v


def report(hangtrace, trace_dir, job, out, full):
    dump = [hangtrace, "dump", "--dir", trace_dir, "--job", job, "--no-stacks", "--quiet", "--looks", "1", "--out", out]
    r = subprocess.run(dump + (["--full"] if full else []), capture_output=True, text=True)
    if r.returncode not in (0, 3):
        return None, "dump%s failed (%d): %s" % (" --full" if full else "", r.returncode, r.stderr.strip()[:300])
    a = subprocess.run([hangtrace, "analyze", out, "--format", "json"], capture_output=True, text=True)
    try:
        text = json.dumps(timeless(json.loads(a.stdout)), indent=1, sort_keys=True)
    except ValueError:
        return None, "analyze %s: no JSON (%d): %s" % (out, a.returncode, a.stderr.strip()[:300])
    return text.replace(out, "DUMP"), ""


def wait_until_ended(folder, seconds=15):
    """Until no process that wrote a file here is alive (host.pid.htrace):
    the two dumps must see the same files, not a job still ending between
    them (a rank writing its exit record)."""
    import glob
    import time
    pids = []
    for f in glob.glob(os.path.join(folder, "*.htrace")):
        parts = os.path.basename(f).split(".")
        if len(parts) >= 3 and parts[-2].isdigit():
            pids.append(int(parts[-2]))
    deadline = time.time() + seconds
    while time.time() < deadline and any(os.path.exists("/proc/%d" % p) for p in pids):
        time.sleep(0.1)
    time.sleep(0.2)  # the last writes of a process that just ended


def main():
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    hangtrace, trace_dir, job = sys.argv[1:]
    wait_until_ended(os.path.join(trace_dir, job))
    work = tempfile.mkdtemp(prefix="ht-compact-")
    try:
        whole, why = report(hangtrace, trace_dir, job, os.path.join(work, "full"), True)
        compact, why2 = report(hangtrace, trace_dir, job, os.path.join(work, "compact"), False)
        if whole is None or compact is None:
            print(why or why2)
            return 2
        if whole == compact:
            return 0
        print("".join(difflib.unified_diff(whole.splitlines(True), compact.splitlines(True), "full", "compact", n=1))[:3000])
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
