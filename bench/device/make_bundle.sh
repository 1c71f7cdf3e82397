#!/usr/bin/env bash
# Packs this machine's CPU build of weft with Debian's Open MPI into one archive that runs on
# another x86-64 Linux machine with glibc >= 2.36 and nothing installed (the 16-core machine of
# docs/scaling.md): .device-rt/rt.tar.xz (about 48 MB), unpacked and used by run_replay.sh there.
#
# Debian's libtorch needs opencv and ffmpeg libraries (and through them Qt, GDAL, codecs: 300 MB)
# that weft never calls; they are replaced by stubs with the same names, symbols and versions
# (make_stub.py), whose functions trap if ever called. The archive also holds a 2000/500-image
# slice of Fashion-MNIST. Build first (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/stubs" .device-rt
for lib in libavcodec.so.59 libavformat.so.59 libavutil.so.57 libswresample.so.4 libswscale.so.6 \
  libopencv_{calib3d,core,dnn,features2d,flann,highgui,imgcodecs,imgproc,optflow,video,videoio,ximgproc}.so.406; do
  /usr/bin/python3 bench/device/make_stub.py "$(realpath "/usr/lib/x86_64-linux-gnu/$lib")" "$work/stubs"
done
/usr/bin/python3 bench/device/bundle.py "$work/rt" build "$work/stubs"
mkdir -p "$work/rt/data"
/usr/bin/python3 - "$work/rt/data" <<'PY'
import gzip, struct, sys
src = "/usr/share/datasets/fashion-mnist"
for name, n in (("train", 2000), ("t10k", 500)):
    images = gzip.open(f"{src}/{name}-images-idx3-ubyte.gz").read()
    labels = gzip.open(f"{src}/{name}-labels-idx1-ubyte.gz").read()
    rows, cols = struct.unpack(">II", images[8:16])
    gzip.open(f"{sys.argv[1]}/{name}-images-idx3-ubyte.gz", "wb").write(
        struct.pack(">IIII", 2051, n, rows, cols) + images[16:16 + n * rows * cols])
    gzip.open(f"{sys.argv[1]}/{name}-labels-idx1-ubyte.gz", "wb").write(
        struct.pack(">II", 2049, n) + labels[8:8 + n])
PY
cat > "$work/rt/env.sh" <<'SH'
# Source it: the carried runtime's paths (Open MPI and PMIx relocated by prefix), no hwloc plugins.
RT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export OPAL_PREFIX=$RT/usr PMIX_INSTALL_PREFIX=$RT/usr/lib/x86_64-linux-gnu/pmix2
export LD_LIBRARY_PATH=$RT/lib PATH=$RT/usr/bin:$RT/bin:$PATH HWLOC_PLUGINS_PATH=$RT/none
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
SH
tar -C "$work" -cf - rt | xz -T0 -9 > .device-rt/rt.tar.xz
ls -l .device-rt/rt.tar.xz
