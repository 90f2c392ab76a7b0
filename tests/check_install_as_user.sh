#!/usr/bin/env bash
# hangtrace installed into a prefix (cmake --install) and used by an
# ordinary user, created for the test and removed after, from the installed
# tree alone: a hung job with the automatic report, a dump, ls and clean;
# what root sees of that user's job; and the installed helpers. Needs root
# (to make the user); skipped otherwise.
#   tests/check_install_as_user.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root to create a user"; exit 77; }
command -v useradd > /dev/null || { echo "SKIP: no useradd"; exit 77; }
user=htuser$$
work=$(mktemp -d /tmp/hangtrace-install-user-XXXXXX)
cleanup() {
  pkill -9 -u "$user" 2> /dev/null || true
  sleep 0.2
  userdel -r "$user" > /dev/null 2>&1 || true
  rm -rf "$work" "/dev/shm/hangtrace-$user"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; [ -f "$work/home/job.out" ] && { echo "--- job.out"; head -40 "$work/home/job.out"; } >&2; exit 1; }

chmod 755 "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
chmod -R a+rX "$prefix"
useradd -M -d "$work/home" -s /bin/bash "$user"
mkdir -p "$work/home"
chown "$user:" "$work/home"
as_user() { runuser -u "$user" -- env -i HOME="$work/home" PATH="$prefix/bin:/usr/bin:/bin" USER="$user" \
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 "$@"; }
ht=$prefix/bin/hangtrace

# A hung job, launched by the user from their home: the seed's hang on two
# pipeline stages. The automatic report reaches its log.
cd "$work/home"
runuser -u "$user" -- env -i HOME="$work/home" PATH="$prefix/bin:/usr/bin:/bin" USER=root PWD="$work/home" \
  OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1 \
  setsid mpirun -np 2 "$ht" run --timeout 2 --job userjob -- "$prefix/bin/hangtrace-trainer" --pp 2 --steps 20 \
  --fault seed-hang@rank=1,step=2 > "$work/home/job.out" 2>&1 &
job_pid=$!
for _ in $(seq 300); do grep -q "hangtrace: the report: " "$work/home/job.out" && break; sleep 0.1; done
grep -q "hangtrace: the report: " "$work/home/job.out" || fail "no automatic report in the job's log"
grep -q "HANG: rank 1 never entered MPI_Bcast" "$work/home/job.out" || fail "the report does not blame rank 1"
# USER=root in its environment: the real uid decides whose folder it is.
[ -d "/dev/shm/hangtrace-$user/userjob" ] || fail "the job's files are not in /dev/shm/hangtrace-$user"
[ "$(stat -c %U "/dev/shm/hangtrace-$user")" = "$user" ] || fail "the trace folder is not the user's"
report=$(grep -o "hangtrace: the report: [^ ]*" "$work/home/job.out" | head -1)
report=${report#hangtrace: the report: }
case "$report" in "$work/home/hangtrace-report-userjob/"*) ;; *) fail "the report went to $report";; esac

# A dump by the user, by job, and by one rank's pid (named after its job).
as_user "$ht" dump --job userjob --out "$work/home/dump" > "$work/dump.out" 2>&1 || fail "dump failed: $(cat "$work/dump.out")"
[ "$(stat -c %a "$work/home/dump")" = 700 ] || fail "the dump folder is $(stat -c %a "$work/home/dump"), not 700"
rank_pid=$(pgrep -u "$user" -f hangtrace-trainer | head -1)
(cd "$work/home" && as_user "$ht" dump -p "$rank_pid" > "$work/dump-p.out" 2>&1) || true
[ -d "$work/home/hangtrace-dump-userjob" ] || fail "dump -p named the job otherwise: $(ls "$work/home")"

# root sees the user's job only in the user's folder, and is told where.
ls_root=$(HANGTRACE_DIR= "$ht" ls 2>&1 || true)
grep -q "/dev/shm/hangtrace-$user" <<< "$ls_root" || fail "root's ls names no other user's folder: $ls_root"
dump_root=$("$ht" dump --job userjob --out "$work/rootdump" 2>&1 || true)
grep -q "hangtrace dump --dir /dev/shm/hangtrace-$user --job userjob" <<< "$dump_root" ||
  fail "root's dump of the user's job gives no hint: $dump_root"

# ls, then clean once the job is gone: its trace folder (round files
# included) and its report folder.
ls_user=$(cd "$work/home" && as_user "$ht" ls)
grep -q "userjob" <<< "$ls_user" || fail "ls does not list the job: $ls_user"
grep -q "hangtrace-report-userjob" <<< "$ls_user" || fail "ls does not list the report folder: $ls_user"
kill -9 -- "-$job_pid" 2> /dev/null || true
pkill -9 -u "$user" -f hangtrace-trainer 2> /dev/null || true
sleep 1
clean=$(cd "$work/home" && as_user "$ht" clean)
[ ! -e "/dev/shm/hangtrace-$user/userjob" ] || fail "clean left the job folder: $clean $(ls -la "/dev/shm/hangtrace-$user/userjob")"
[ ! -e "$work/home/hangtrace-report-userjob" ] || fail "clean left the report folder: $clean"

# The installed srun-dump script finds the installed hangtrace.
"$prefix/bin/hangtrace-srun-dump" --help > "$work/srun-help.out" 2>&1 || fail "hangtrace-srun-dump: $(cat "$work/srun-help.out")"
grep -q "srun-dump" "$work/srun-help.out" || fail "hangtrace-srun-dump did not run hangtrace srun-dump"

# A program linked through pkg-config alone finds the library at run time.
cat > "$work/annotate.c" <<'C'
#include <hangtrace.h>
#include <stdio.h>
int main(void) { printf("traced=%d\n", hangtrace_enabled()); return 0; }
C
pc=$(dirname "$(find "$prefix" -name hangtrace.pc | head -1)")
# shellcheck disable=SC2046
cc "$work/annotate.c" -o "$work/annotate" $(PKG_CONFIG_PATH=$pc pkg-config --cflags --libs hangtrace)
chmod 755 "$work/annotate"
as_user "$work/annotate" | grep -q "traced=" || fail "a program linked with pkg-config's flags does not start"
echo "PASS: installed into $prefix, used by $user"
