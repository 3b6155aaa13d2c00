#!/bin/bash
# Forward Conv2D in NCHW against NHWC, one line per conv row of a shapes file:
#   name  NCHW-GFLOP/s  NHWC-GFLOP/s  NCHW-kernel
# (NCHW runs the NHWC tiles between per-image channels-last copies where the plan says so; the
# ratio is what the NCHW layout costs.)
#
#   benchmarks/forward_layouts.sh build/convjit ../shared/bench/networks.txt [threads]
set -euo pipefail
convjit="${1:?usage: forward_layouts.sh CONVJIT SHAPES [THREADS]}"
shapes="${2:?usage: forward_layouts.sh CONVJIT SHAPES [THREADS]}"
threads="${3:-2}"
gflops() {  # prints "GFLOP/s kernel" of one `convjit run`
  "$convjit" run --op conv2d --threads "$threads" --repeats 5 "$@" 2>&1 |
    awk '/^kernel/{k=$2} /^GFLOP/{g=$2} END{print g, k}'
}
grep -v '^#' "$shapes" | awk '$2 == "conv"' |
  while read -r name kind n h w ic m kh kw s pad d; do
    common=(--padding "$pad" --filter-sizes "$kh,$kw,$ic,$m")
    nchw=$(gflops "${common[@]}" --strides "1,1,$s,$s" --dilations "1,1,$d,$d" \
           --input-sizes "$n,$ic,$h,$w" --data-format NCHW)
    nhwc=$(gflops "${common[@]}" --strides "1,$s,$s,1" --dilations "1,$d,$d,1" \
           --input-sizes "$n,$h,$w,$ic")
    echo "$name ${nchw%% *} ${nhwc%% *} ${nchw#* }"
  done
