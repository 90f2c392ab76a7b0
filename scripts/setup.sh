#!/usr/bin/env bash
# Installs what hangtrace needs on Debian 12 (only what is missing), then
# configures and builds into build/. Safe to run again: it does only what is
# left to do.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libunwind-dev libdw-dev libelf-dev        # stacks: in process, and from outside
  openmpi-bin libopenmpi-dev                # MPI tracing, tests, the trainer
  nlohmann-json3-dev libcli11-dev           # reports, command line
  libgtest-dev libbenchmark-dev             # tests, bench/
  python3-minimal                           # generates the wrappers from interpose/*.spec
  libpython3-dev                            # the torch hook's record path in C++ (python/_hangtrace_torch.cc)
  python3-mpi4py                            # the Python (mpi4py) jobs of the tests
  python3-torch                             # torch.distributed (gloo) jobs of the tests
  python3-h5py-mpi                          # h5py with the mpio driver (MPI-IO) jobs of the tests
  gfortran mpich libmpich-dev               # Fortran MPI programs, and programs built with MPICH
  hpcc netpipe-openmpi netpipe-mpich2 elk-lapw lammps gromacs  # real MPI applications the tests run
  libamdhip64-dev                           # HIP headers: the HIP wrappers (CUDA/NCCL come from /usr/local/cuda)
  slurmctld slurmd slurm-client munge tini iproute2  # the localhost SLURM cluster of the srun-dump test (ss: free ports)
  graphviz                                  # the pictures as SVG (--graph, --dot), and their render test
  chromium chromium-driver python3-selenium # the HTML report's test in a real, headless browser
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -f build/build.ninja ]; then
  echo "setup: configuring build/"
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
echo "setup: building"
cmake --build build -- -j"$(nproc)" | grep -vE '^\[[0-9]+/[0-9]+\] (Building|Linking)' || true
test -x build/bin/hangtrace && test -f build/lib/libhangtrace.so
echo "setup: done (build/bin/hangtrace, build/lib/libhangtrace.so)"
