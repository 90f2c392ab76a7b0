#!/usr/bin/env bash
# How long `hangtrace dump` holds a running thread: a program computes in a
# loop and reports the longest gap between two iterations while it is
# dumped once (a ptrace stop: its registers and stack are copied, then it
# goes on). Prints the gap of each of N dumps (default 5).
#   bench/bench_dump_pause.sh [BUILD_DIR] [N]
set -euo pipefail
build=$(cd "${1:-$(dirname "$0")/../build}" && pwd)
n=${2:-5}
work=$(mktemp -d /tmp/hangtrace-bench-pause-XXXXXX)
trap 'rm -rf "$work"' EXIT
cat > "$work/gapper.c" <<'C'
#include <signal.h>
#include <stdio.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static volatile sig_atomic_t stop = 0;
static void on_usr1(int s) { (void)s; stop = 1; }
int main(void) {
  signal(SIGUSR1, on_usr1);
  double last = now(), worst = 0;
  volatile double x = 1;
  while (!stop) {
    for (int k = 0; k < 1000; k++) x = x * 1.0000001;
    double t = now();
    if (t - last > worst) worst = t - last;
    last = t;
  }
  printf("%.3f\n", worst * 1e3);
  return 0;
}
C
cc -O2 -o "$work/gapper" "$work/gapper.c"
for i in $(seq "$n"); do
  "$work/gapper" > "$work/gap" &
  pid=$!
  sleep 0.5
  "$build/bin/hangtrace" dump -p "$pid" -o "$work/dump$i" > /dev/null 2>&1
  sleep 0.3
  kill -USR1 "$pid"
  wait "$pid"
  echo "dump $i: the running thread's longest pause $(cat "$work/gap") ms"
done
