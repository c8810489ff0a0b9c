#!/usr/bin/env bash
# A one-node SLURM cluster for the `slurm` tests (tests/slurm/CMakeLists.txt):
#
#   tests/slurm/cluster.sh start DIR   munged, slurmctld and slurmd with a generated
#                                      munge key and slurm.conf in DIR; returns when
#                                      the node is idle (clients: SLURM_CONF=DIR/slurm.conf)
#   tests/slurm/cluster.sh stop DIR    cancels every job, stops the three daemons by
#                                      their pid files, and waits until they are gone
#
# Root only (slurmd runs jobs as their user) and with Debian's slurm-wlm and
# munge installed (scripts/dev installs them when root); otherwise `start`
# writes the reason to DIR/skipped and exits 77, which ctest reads as a skip.
set -uo pipefail

action=${1:?usage: cluster.sh start|stop DIR}
dir=${2:?usage: cluster.sh start|stop DIR}

skip() {
  mkdir -p "$dir"
  echo "$1" > "$dir/skipped"
  echo "skipped: $1"
  exit 77
}

# pid_alive FILE: the daemon whose pid FILE names is running.
pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop() {
  [ -f "$dir/slurm.conf" ] || return 0
  export SLURM_CONF="$dir/slurm.conf"
  # Jobs first, so that no slurmstepd or job process outlives the cluster.
  if pid_alive "$dir/slurmctld.pid"; then
    scancel --full --quiet --user=root 2>/dev/null || true
    for _ in $(seq 1 100); do
      [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  for daemon in slurmd slurmctld munged; do
    local file="$dir/$daemon.pid"
    pid_alive "$file" || continue
    local pid
    pid=$(cat "$file")
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  done
  rm -f "$dir/slurm.conf"
  return 0
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
  [ "$(id -u)" -eq 0 ] || skip "not root: slurmd must run as root to start jobs"
  for tool in munged slurmctld slurmd sbatch sinfo scancel; do
    command -v "$tool" >/dev/null 2>&1 ||
      skip "$tool not found: install slurm-wlm and munge (scripts/dev setup does, as root)"
  done
  stop  # a cluster an earlier run left in DIR
  rm -rf "$dir"
  mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
  chmod 700 "$dir" "$dir/munge"
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/seed" ||
    { echo "munged did not start:"; cat "$dir/munged.log"; exit 1; }

  local memory
  memory=$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')
  cat > "$dir/slurm.conf" <<CONF
ClusterName=runnertest
SlurmctldHost=localhost
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerParameters=sched_interval=1
MpiDefault=none
ReturnToService=2
KillWait=5
NodeName=localhost NodeAddr=127.0.0.1 CPUs=2 RealMemory=${memory:-1000} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -i -f "$SLURM_CONF" || { echo "slurmctld did not start:"; cat "$dir/slurmctld.log"; stop; exit 1; }
  slurmd -N localhost -f "$SLURM_CONF" || { echo "slurmd did not start:"; cat "$dir/slurmd.log"; stop; exit 1; }
  for _ in $(seq 1 300); do
    if [ "$(sinfo -h -N -o %t 2>/dev/null)" = idle ]; then
      echo "SLURM $(sinfo --version | cut -d' ' -f2) cluster up: SLURM_CONF=$SLURM_CONF"
      return 0
    fi
    sleep 0.2
  done
  echo "the node did not become idle within 60 s:"
  sinfo -N -l
  tail -n 20 "$dir/slurmctld.log" "$dir/slurmd.log"
  stop
  exit 1
}

case "$action" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: cluster.sh start|stop DIR" >&2; exit 2 ;;
esac
