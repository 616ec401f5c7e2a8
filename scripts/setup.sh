#!/usr/bin/env bash
# Installs the Debian packages posenc needs, if any is missing.
# As root it runs apt-get; otherwise it prints the exact command and fails.
# libopenblas0-openmp: libtorch's libblas.so.3 then resolves to OpenBLAS
# instead of netlib's reference BLAS (20-50x slower). The OpenMP build shares
# libtorch's libgomp thread pool; the pthread build adds a second pool that
# fights it on 2 cores (docs/benchmarks.md has the measurement).
# wordnet-base, dict-gcide, fortunes: the English corpus of the experiments,
# tokenized with SentencePiece (docs/experiments.md).
# python3-pytest-xdist: the Python tests on every core, one test file per
# worker (module fixtures are built once).
# slurm-wlm, munge: only for the tests, which start a one-node Slurm cluster on
# localhost to run `posenc experiment run --slurm` for real.
set -euo pipefail

packages=(
  cmake ninja-build g++ make
  libtorch-dev python3-torch python3-numpy python3-pytest python3-pytest-xdist python3-venv python3-pip
  libopenblas0-openmp
  libgtest-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
  libcairo2-dev fonts-dejavu-core chromium
  libsentencepiece-dev zlib1g-dev wordnet-base dict-gcide fortunes fortunes-min
  clang libclang-rt-14-dev
  slurm-wlm munge
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "posenc set-up: missing Debian packages; run as root:" >&2
  echo "  apt-get update && apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "posenc set-up: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
