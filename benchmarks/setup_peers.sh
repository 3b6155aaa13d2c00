#!/usr/bin/env bash
# Creates the virtual environment the benchmark's newer peers come from:
#   - TensorFlow's own CPU kernels (tensorflow-cpu, with numpy and ml_dtypes) for tf_peer.py;
#   - the newest oneDNN release from the Python package index (onednn: libdnnl.so.3;
#     onednn-devel: its headers; tbb-devel: the headers of its threading runtime), which the
#     bench's second oneDNN peer library is built against;
#   - matplotlib for plot_ratios.py.
#
# usage: benchmarks/setup_peers.sh [VENV_DIR]        (default /tmp/peers)
# Then configure the build with -DCONVJIT_BENCH_PEERS_VENV=VENV_DIR (see benchmarks/README.md).
# Environment: PYTHON (default python3); TF_VERSION, ONEDNN_VERSION pin other releases.
set -euo pipefail

venv="${1:-/tmp/peers}"
python="${PYTHON:-python3}"
tf_version="${TF_VERSION:-2.21.0}"
onednn_version="${ONEDNN_VERSION:-2026.1.0}"

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --upgrade pip
"$venv/bin/pip" install --quiet "tensorflow-cpu==$tf_version" numpy ml_dtypes matplotlib \
  "onednn==$onednn_version" "onednn-devel==$onednn_version"

# TBB's headers, for the peer library to cap the threads of this oneDNN (its threading runtime
# is TBB): the release that came with it.
tbb_version="$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("tbb"))')"
"$venv/bin/pip" install --quiet "tbb-devel==$tbb_version"

# The wheel's OpenCL ICD file names a path that does not exist, and without a working ICD the
# library's CPU engine finds no device: write one that names the installed runtime. The bench
# points OCL_ICD_VENDORS at this directory when it loads the peer.
if [ -e "$venv/lib/libintelocl.so" ]; then
  mkdir -p "$venv/etc/OpenCL/icd"
  echo "$venv/lib/libintelocl.so" > "$venv/etc/OpenCL/icd/intel-cpu.icd"
fi

for needed in "$venv/include/oneapi/dnnl/dnnl.hpp" "$venv/lib/libdnnl.so.3" \
              "$venv/include/oneapi/tbb/global_control.h"; do
  [ -e "$needed" ] || { echo "setup_peers: $needed is missing after the install" >&2; exit 1; }
done
"$venv/bin/python" -c 'import tensorflow as tf, numpy, ml_dtypes; print("tensorflow", tf.__version__)'
echo "peers ready in $venv: configure with -DCONVJIT_BENCH_PEERS_VENV=$venv"
