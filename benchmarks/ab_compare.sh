#!/usr/bin/env bash
# Old build against new on a shapes file: for every shape and both of its gradient ops,
# `convjit run --repeats 30` of the old and the new executable alternately, twice each, and
# the best median of each; prints GFLOP/s and new/old. For "nothing got worse" checks of a
# change that must not move speed (run it on an otherwise idle machine).
#
#   benchmarks/ab_compare.sh OLD/convjit NEW/convjit ../shared/bench/shapes.txt [THREADS]
set -euo pipefail
old="$1"; new="$2"; shapes="$3"; threads="${4:-2}"

# median_gflops EXE ARGS...: the run's median as GFLOP/s.
median_gflops() {
  local out ms flops
  out="$(CONVJIT_CACHE_DIR=off "$@" --repeats 30 2>&1)" || { echo "$out" >&2; return 1; }
  ms="$(sed -n 's/^run *\([0-9.]*\) \(.s\) median.*/\1 \2/p' <<<"$out" \
        | awk '{print ($2 == "us") ? $1 / 1000 : ($2 == "ms" ? $1 : $1 * 1000)}')"
  flops="$(sed -n 's/^GFLOP.*(\([0-9.e+-]*\) GFLOP per run)/\1/p' <<<"$out")"
  awk -v f="$flops" -v ms="$ms" 'BEGIN {printf "%.1f", f / ms * 1000}'
}

grep -v '^#' "$shapes" | while read -r name kind n h w ic m kh kw stride pad dil; do
  [ -n "$name" ] || continue
  if [ "$kind" = dw ]; then
    ops="DepthwiseConv2dNativeBackpropInput DepthwiseConv2dNativeBackpropFilter"
  else
    ops="Conv2DBackpropInput Conv2DBackpropFilter"
  fi
  for op in $ops; do
    args=(run --op "$op" --input-sizes "$n,$h,$w,$ic" --filter-sizes "$kh,$kw,$ic,$m"
          --strides "1,$stride,$stride,1" --dilations "1,$dil,$dil,1" --padding "$pad"
          --threads "$threads")
    a1="$(median_gflops "$old" "${args[@]}")"; b1="$(median_gflops "$new" "${args[@]}")"
    a2="$(median_gflops "$old" "${args[@]}")"; b2="$(median_gflops "$new" "${args[@]}")"
    awk -v n="$name" -v op="$op" -v a1="$a1" -v a2="$a2" -v b1="$b1" -v b2="$b2" 'BEGIN {
      a = a1 > a2 ? a1 : a2; b = b1 > b2 ? b1 : b2
      printf "%-22s %-36s old %7.1f new %7.1f x%5.2f\n", n, op, a, b, b / a }'
  done
done
