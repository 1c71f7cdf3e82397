#!/usr/bin/env bash
# Installs weft's build and run dependencies from Debian 12's archive (run as root).
set -euo pipefail
packages=(
  build-essential cmake ccache pkg-config clang-format
  clang libclang-rt-14-dev  # sanitizers and libFuzzer (scripts/sanitize-and-fuzz.sh)
  libopenmpi-dev openmpi-bin
  libtorch-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libfmt-dev nlohmann-json3-dev zlib1g-dev
  libjpeg62-turbo-dev libpng-dev  # image-folder readers (weft/data/image_codec.hpp)
  petsc-dev
  dataset-fashion-mnist
  python3-dev python3-torch pybind11-dev python3-mpi4py python3-pytest python3-numpy
  gnuplot-nox
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
