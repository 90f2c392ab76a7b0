#!/usr/bin/env python3
"""Counts the metadata operations a process tree made on one folder, from
an `strace -f` log: opens, creates, stats, renames, unlinks, mkdirs and
listings whose path lies under FOLDER, by name, through a descriptor of it
(`/proc/PID/fd/N/...`, how `hangtrace auto-report` hands it to its dumps),
or relative to such a descriptor. Descriptors are followed across
clone/fork (a child starts with its parent's) and dup. Prints one line per
kind and the total. For bench_report_scale.sh.

    count_folder_ops.py FOLDER STRACE_LOG
"""
import os
import re
import sys

folder = os.path.realpath(sys.argv[1])
line_re = re.compile(r"^(\d+)\s+(\w+)\((.*)\)\s+=\s+(-?\d+|\?)")
string_re = re.compile(r'"((?:[^"\\]|\\.)*)"')
fds = {}  # pid -> {fd: absolute path of what it opened}
counts = {}
listed = {}  # folder -> getdents64 calls on it
# A call whose start and end strace printed apart is joined first.
pending = {}
lines = []
for raw in open(sys.argv[2], errors="replace"):
    raw = raw.rstrip("\n")
    m = re.match(r"^(\d+)\s+(.*) <unfinished \.\.\.>$", raw)
    if m:
        pending[m.group(1)] = m.group(2)
        continue
    m = re.match(r"^(\d+)\s+<\.\.\. \w+ resumed>(.*)$", raw)
    if m and m.group(1) in pending:
        raw = m.group(1) + " " + pending.pop(m.group(1)) + m.group(2)
    lines.append(raw)


def table(pid):
    return fds.setdefault(pid, {})


def resolve(pid, dirfd, path):
    """The absolute path a call names, or None when unknown."""
    m = re.match(r"^/proc/(\d+|self)/fd/(\d+)(/.*)?$", path)
    if m:
        owner = pid if m.group(1) == "self" else m.group(1)
        base = fds.get(owner, {}).get(int(m.group(2)))
        return None if base is None else base + (m.group(3) or "")
    if path.startswith("/"):
        return path
    if dirfd == "AT_FDCWD" or dirfd is None:
        return None
    base = table(pid).get(int(dirfd))
    return None if base is None else os.path.join(base, path)


def under(path):
    return path is not None and (path == folder or path.startswith(folder + "/"))


def count(kind):
    counts[kind] = counts.get(kind, 0) + 1


for raw in lines:
    m = line_re.match(raw)
    if not m:
        continue
    pid, call, args, ret = m.groups()
    first = args.split(",", 1)[0].strip()
    strings = string_re.findall(args)
    if call in ("clone", "clone3", "fork", "vfork") and ret.isdigit():
        fds[ret] = dict(table(pid))
        continue
    if call in ("dup", "dup2", "dup3") and ret.isdigit():
        old = int(first)
        if old in table(pid):
            table(pid)[int(ret)] = table(pid)[old]
        continue
    if call == "close":
        table(pid).pop(int(first), None) if first.isdigit() else None
        continue
    if call in ("openat", "open"):
        dirfd = first if call == "openat" else None
        path = resolve(pid, dirfd, strings[0]) if strings else None
        if path is not None:
            path = os.path.normpath(path)
        if ret.isdigit():
            table(pid)[int(ret)] = path
        if under(path):
            count("open (create)" if "O_CREAT" in args else "open")
        continue
    if call in ("mkdirat", "mkdir", "unlinkat", "unlink", "newfstatat", "statx", "readlinkat"):
        dirfd = first if call.endswith("at") or call == "statx" else None
        path = strings[0] if strings else ""
        target = resolve(pid, dirfd, path) if path else (table(pid).get(int(dirfd)) if dirfd and dirfd.isdigit() else None)
        if under(target):
            count({"newfstatat": "stat", "statx": "stat", "mkdirat": "mkdir", "unlinkat": "unlink"}.get(call, call))
        continue
    if call in ("renameat", "renameat2", "rename", "linkat", "symlinkat"):
        parts = [p.strip() for p in args.split(",")]
        target = None
        if call == "rename":
            target = resolve(pid, None, strings[1]) if len(strings) > 1 else None
        elif len(strings) > 1 and len(parts) > 2:
            target = resolve(pid, parts[2], strings[1])
        if under(target):
            count("rename" if call.startswith("rename") else call)
        continue
    if call in ("getdents64", "fstat", "fstatfs", "fsync", "fdatasync"):
        if first.isdigit() and under(table(pid).get(int(first))):
            count({"getdents64": "list (getdents64)"}.get(call, call))
            if call == "getdents64":
                where = table(pid).get(int(first))
                listed[where] = listed.get(where, 0) + 1
        continue

total = 0
for kind in sorted(counts):
    print(f"  {kind:<18} {counts[kind]}")
    total += counts[kind]
print(f"  {'total':<18} {total}")
# The folders listed most: a folder of many entries read in several
# getdents64 calls is one listing of several calls (the last returns 0).
for where, n in sorted(listed.items(), key=lambda kv: -kv[1])[:3]:
    print(f"  getdents64 on {os.path.relpath(where, folder)}: {n}")
