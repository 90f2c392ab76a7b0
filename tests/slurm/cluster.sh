#!/usr/bin/env bash
# A real SLURM cluster on localhost, for the tests: munged, slurmctld and N
# emulated nodes, each a slurmd in its own UTS, PID and mount namespace (its
# own hostname, its own /proc, its own /dev/shm) with tini as its init, on
# its own port. As on a real cluster, a node's /dev/shm (where trace files
# go by default) is its own: no process reads another node's files. No
# systemd: every daemon is started here and stopped by its recorded pid.
#
#   tests/slurm/cluster.sh start DIR [NODES]   prints "export SLURM_CONF=..."
#   tests/slurm/cluster.sh stop DIR
#
# Facts this relies on (Debian 12, Slurm 22.05): SlurmdParameters=
# config_overrides lets a node declare 8 CPUs on a 2-core machine; the
# per-node TmpFS (%n) keeps pmix steps of different nodes apart; Debian's
# Open MPI starts under `srun --mpi=pmix`.
set -euo pipefail
cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: $0 start|stop DIR [NODES]" >&2; exit 2; }

stop() {
  for f in "$dir"/run/*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null || true
  done
  sleep 0.5
  for f in "$dir"/run/*.pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$f"
  done
}

if [ "$cmd" = stop ]; then
  stop
  exit 0
fi
[ "$cmd" = start ] || { echo "usage: $0 start|stop DIR [NODES]" >&2; exit 2; }
nodes=${3:-4}
for exe in munged slurmctld slurmd srun tini unshare; do
  command -v "$exe" >/dev/null || { echo "cluster: $exe is missing (scripts/setup.sh installs it)" >&2; exit 1; }
done
mkdir -p "$dir"/{etc,state,spool,log,run,munge,tmp}
chmod 700 "$dir" "$dir/munge"
for k in $(seq "$nodes"); do mkdir -p "$dir/spool/node$k" "$dir/tmp/node$k"; done

# Free ports: slurmctld, then one per node. Below the kernel's ephemeral
# range (32768 and up: the ports MPI jobs' connections take), and checked
# free: a port in use kills slurmctld at start (seen once under ctest -j2).
ports_free() {
  for ((p = $1; p <= $1 + nodes; ++p)); do
    [ -z "$(ss -Htan "sport = :$p" 2>/dev/null)" ] || return 1
  done
}
for _ in $(seq 50); do
  base=$(( 20000 + (RANDOM % 12000) ))
  ports_free "$base" && break
done
ctl_port=$base
first_node_port=$((base + 1))
last_node_port=$((base + nodes))

dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.sock" \
  --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed"

host=$(hostname)
cat > "$dir/etc/slurm.conf" <<CONF
ClusterName=hangtrace-test
FirstJobId=$(( 1000 + RANDOM * 30 ))
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctl_port
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld-daemon.pid
SlurmdPidFile=$dir/spool/%n/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
TmpFS=$dir/tmp/%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
InactiveLimit=0
KillWait=5
MessageTimeout=20
NodeName=node[1-$nodes] NodeHostname=node[1-$nodes] NodeAddr=127.0.0.1 Port=[$first_node_port-$last_node_port] CPUs=8 State=UNKNOWN
PartitionName=test Nodes=node[1-$nodes] Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF="$dir/etc/slurm.conf"

setsid slurmctld -D -i -c >"$dir/log/slurmctld.out" 2>&1 < /dev/null &
echo $! > "$dir/run/slurmctld.pid"
for k in $(seq "$nodes"); do
  # PID 1 of the node is tini (it reaps orphans); --kill-child: when unshare
  # (the recorded pid) dies, tini gets SIGKILL, and with it the whole node.
  # --mount-proc makes a private mount namespace, where /dev/shm is a fresh
  # tmpfs of the node's own.
  setsid unshare --uts --pid --fork --kill-child --mount-proc \
    sh -c "hostname node$k && mount -t tmpfs -o mode=1777,size=2g tmpfs /dev/shm &&
           exec tini -s -- slurmd -D -N node$k" >"$dir/log/node$k.out" 2>&1 < /dev/null &
  echo $! > "$dir/run/node$k.pid"
done

# Wait until every node is idle.
for i in $(seq 150); do
  idle=$(sinfo -h -N -o '%T' 2>/dev/null | grep -c '^idle' || true)
  [ "$idle" = "$nodes" ] && break
  kill -0 "$(cat "$dir/run/slurmctld.pid")" 2>/dev/null || break  # it died: say so now, not in minutes
  sleep 0.2
done
if [ "${idle:-0}" != "$nodes" ]; then
  echo "cluster: only ${idle:-0} of $nodes nodes came up; logs in $dir/log" >&2
  sinfo -N >&2 || true
  tail -5 "$dir"/log/*.log >&2 || true
  stop
  exit 1
fi
echo "export SLURM_CONF=$SLURM_CONF"
