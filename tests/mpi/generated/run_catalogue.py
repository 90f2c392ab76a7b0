#!/usr/bin/env python3
"""Build, run and check the generated catalogue of MPI bug programs.

Each program (gen_catalogue.py writes them: C, built with mpicc, or
mpi4py, run by Debian's python3) runs traced under the real mpirun until it ends, or until every rank has its file and has had time to
get stuck; then `hangtrace analyze` reads the job, twice half a second apart
as --interval does (once when the job has ended), and its JSON is checked
against the program's truth: the verdict, the culprits, the call (or state)
of each rank, and the words the reasons must say.

  run_catalogue.py --build BUILD                  every program
  run_catalogue.py --build BUILD --sample 2       two of each family (ctest)
  run_catalogue.py --build BUILD --family cycle   one family
  run_catalogue.py --build BUILD --only NAME      one program, its report shown

Exit status: 0 every program right, 1 some wrong, 2 usage or build error,
77 nothing to run (only mpi4py programs, and no mpi4py).
"""
import argparse
import concurrent.futures
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"  # Debian's, with python3-mpi4py (pyenv's first python3 has no mpi4py)
MPI_AS_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def parse_truth(line):
    """'name family TRUTH np=.. verdict=.. culprits=.. ops=.. [words=..]'"""
    fields = line.split()
    t = {"name": fields[0], "family": fields[1], "culprits": set(), "ops": {}, "words": ""}
    for field in fields[3:]:
        key, _, value = field.partition("=")
        if key == "np":
            t["np"] = int(value)
        elif key == "verdict":
            t["verdict"] = value
        elif key == "culprits":
            t["culprits"] = {int(x) for x in value.split(",") if x}
        elif key == "ops":
            for item in filter(None, value.split(",")):
                rank, _, ops = item.partition(":")
                t["ops"][int(rank)] = set(ops.split("|"))
        elif key == "words":
            t["words"] = value.replace("~", " ")
    return t


def sample(programs, k):
    """k programs of each family, spread over it (the same ones every time)."""
    by_family = {}
    for p in programs:
        by_family.setdefault(p["family"], []).append(p)
    chosen = []
    for family in by_family.values():
        step = max(1, len(family) // k)
        chosen += family[::step][:k]
    return chosen


def build(programs, src_dir, bin_dir, jobs):
    os.makedirs(bin_dir, exist_ok=True)

    def one(p):
        if p["python"]:
            return None
        src, exe = os.path.join(src_dir, p["name"] + ".c"), os.path.join(bin_dir, p["name"])
        if os.path.exists(exe) and os.path.getmtime(exe) >= os.path.getmtime(src):
            return None
        r = subprocess.run(["mpicc", "-g", "-O1", "-o", exe, src], capture_output=True, text=True)
        return None if r.returncode == 0 else "%s: %s" % (p["name"], r.stderr.strip())

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        errors = [e for e in pool.map(one, programs) if e]
    return errors


def rank_places(report):
    """Each rank's call (when in one) or state, from the report's groups."""
    places = {}
    for g in report.get("groups", []):
        place = g.get("api") if g.get("state") == "in_call" else g.get("state")
        for r in g.get("rank_list", []):
            places[r] = place
    return places


def judge(t, report):
    wrong = []
    if report.get("verdict") != t["verdict"]:
        wrong.append("verdict %s, want %s" % (report.get("verdict"), t["verdict"]))
    culprits = {c["rank"] for c in report.get("culprits", [])}
    if culprits != t["culprits"]:
        wrong.append("culprits %s, want %s" % (sorted(culprits), sorted(t["culprits"])))
    places = rank_places(report)
    for rank, ops in sorted(t["ops"].items()):
        if places.get(rank) not in ops:
            wrong.append("rank %d in %s, want %s" % (rank, places.get(rank), "|".join(sorted(ops))))
    reasons = " | ".join([report.get("summary", "")] + [c.get("why", "") for c in report.get("culprits", [])])
    if t["words"] and t["words"] not in reasons:
        wrong.append("the reasons lack %r" % t["words"])
    return wrong


def in_init(hangtrace, folder):
    """Whether a rank of the job in `folder` has made no call yet (a
    launcher's rank has its file from its start; Python imports mpi4py
    first) or is still in MPI_Init."""
    out = subprocess.run([hangtrace, "analyze", folder, "--format", "json"], capture_output=True, text=True)
    try:
        groups = json.loads(out.stdout).get("groups", [])
    except ValueError:
        return True
    return not groups or any(g.get("api", "") == "" or
                             (g.get("api") in ("MPI_Init", "MPI_Init_thread") and g.get("state") != "exited")
                             for g in groups)


def run_one(t, command, hangtrace, settle):
    """Run one program traced; return (its analysis as JSON, the text report,
    how a compact dump's diagnosis differs from the whole files', "" if not)."""
    folder = tempfile.mkdtemp(prefix="ht-cat-")
    env = dict(os.environ, **MPI_AS_ROOT)
    job = subprocess.Popen(["mpirun", "-np", str(t["np"]), "--oversubscribe", hangtrace, "run", "--dir", folder,
                            "--job", "cat", "--timeout", "0"] + command,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True,
                           cwd=folder)  # the files a program makes go with the folder
    try:
        # Until it ends, or every rank has its file, is past MPI_Init (on a
        # loaded machine the start alone may outlast the settling time, and
        # ranks all in MPI_Init read as a hang below MPI) and has had time
        # to get stuck.
        deadline, stuck_at = time.time() + 30, None
        while job.poll() is None and time.time() < deadline:
            time.sleep(0.05)
            if stuck_at is None and len(glob.glob(folder + "/cat/*.htrace")) >= t["np"] and \
                    not in_init(hangtrace, folder + "/cat"):
                stuck_at = time.time() + settle
            if stuck_at is not None and time.time() >= stuck_at:
                break
        ended = job.poll() is not None
        look = [hangtrace, "analyze", folder + "/cat"] + ([] if ended else ["--interval", "0.5"])
        out = subprocess.run(look + ["--format", "json"], capture_output=True, text=True)
        try:
            report = json.loads(out.stdout)
        except ValueError:
            report = {"verdict": "(no JSON: exit %d: %s)" % (out.returncode, out.stderr.strip()[:300])}
        text = subprocess.run(look, capture_output=True, text=True).stdout if not ended else \
            subprocess.run([hangtrace, "analyze", folder + "/cat"], capture_output=True, text=True).stdout
        try:
            os.killpg(job.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        job.wait()
        # The files as the job left them, dumped whole and compact: the same diagnosis?
        same = subprocess.run([sys.executable, os.path.join(HERE, "..", "..", "compare_compact.py"), hangtrace, folder,
                               "cat"], capture_output=True, text=True)
        compact = "" if same.returncode == 0 else (same.stdout.strip() or same.stderr.strip() or "exit %d" % same.returncode)
        return report, text, compact
    finally:
        try:
            os.killpg(job.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        job.wait()
        shutil.rmtree(folder, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--build", required=True, help="the build folder (bin/hangtrace; programs go to tests/generated)")
    ap.add_argument("--family", action="append", default=[], help="only this family (repeatable)")
    ap.add_argument("--only", action="append", default=[], help="only this program (repeatable); shows its report")
    ap.add_argument("--sample", type=int, default=0, help="only this many programs of each family")
    ap.add_argument("--settle", type=float, default=1.5, help="seconds to wait once every rank has its file")
    ap.add_argument("--results", help="write each program's line here")
    args = ap.parse_args()

    hangtrace = os.path.abspath(os.path.join(args.build, "bin", "hangtrace"))
    if not os.access(hangtrace, os.X_OK):
        print("run_catalogue: no %s: build first" % hangtrace, file=sys.stderr)
        return 2
    if not shutil.which("mpicc") or not shutil.which("mpirun"):
        print("run_catalogue: mpicc and mpirun are needed (./scripts/setup.sh installs Open MPI)", file=sys.stderr)
        return 2
    src_dir = os.path.join(args.build, "tests", "generated")
    r = subprocess.run([sys.executable, os.path.join(HERE, "gen_catalogue.py"), src_dir])
    if r.returncode != 0:
        return 2
    programs = [parse_truth(line) for line in open(os.path.join(src_dir, "catalogue.txt")) if line.strip()]
    for p in programs:
        p["python"] = os.path.exists(os.path.join(src_dir, p["name"] + ".py"))
    if args.family:
        unknown = set(args.family) - {p["family"] for p in programs}
        if unknown:
            print("run_catalogue: no family %s" % ", ".join(sorted(unknown)), file=sys.stderr)
            return 2
        programs = [p for p in programs if p["family"] in args.family]
    if args.only:
        programs = [p for p in programs if p["name"] in args.only]
        if len(programs) != len(set(args.only)):
            print("run_catalogue: not every --only names a program (gen_catalogue.py --list)", file=sys.stderr)
            return 2
    if args.sample:
        programs = sample(programs, args.sample)

    if any(p["python"] for p in programs) and subprocess.run(
            [PYTHON, "-c", "import mpi4py"], capture_output=True).returncode != 0:
        print("run_catalogue: %s has no mpi4py (./scripts/setup.sh installs python3-mpi4py): its programs are "
              "skipped" % PYTHON, file=sys.stderr)
        programs = [p for p in programs if not p["python"]]
        if not programs:
            return 77
    bin_dir = os.path.join(src_dir, "bin")
    print("building %d programs ..." % len(programs), flush=True)
    errors = build(programs, src_dir, bin_dir, os.cpu_count() or 2)
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 2

    score, lines = {}, []
    start = time.time()
    for i, t in enumerate(programs):
        # A Python rank imports mpi4py first: more time before it can be stuck.
        command = [PYTHON, os.path.abspath(os.path.join(src_dir, t["name"] + ".py"))] if t["python"] else \
            [os.path.abspath(os.path.join(bin_dir, t["name"]))]
        report, text, compact = run_one(t, command, hangtrace, args.settle + (2.5 if t["python"] else 0))
        wrong = judge(t, report)
        if compact:
            wrong.append("a compact dump's diagnosis differs from the whole files': " + compact)
        right, total = score.get(t["family"], (0, 0))
        score[t["family"]] = (right + (not wrong), total + 1)
        line = "[%3d/%d] %-48s %s" % (i + 1, len(programs), t["name"], "right" if not wrong else
                                      "WRONG: " + "; ".join(wrong))
        print(line, flush=True)
        lines.append(line)
        if wrong and (args.only or len(programs) <= 4):
            print(text)
            print("summary: " + report.get("summary", ""))
    print("\n%-18s %s" % ("family", "right"))
    for family, (right, total) in score.items():
        print("%-18s %d of %d" % (family, right, total))
    right = sum(r for r, _ in score.values())
    print("%-18s %d of %d (%.0f s)" % ("all", right, len(programs), time.time() - start))
    if args.results:
        with open(args.results, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0 if right == len(programs) else 1


if __name__ == "__main__":
    sys.exit(main())
