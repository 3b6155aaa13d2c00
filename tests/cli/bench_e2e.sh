#!/usr/bin/env bash
# `convjit bench` end to end on a tiny shapes file, one case per ctest entry:
#   bench_e2e.sh <path to convjit> <case> <scratch dir>
# Cases: the three output formats (with whatever peer libraries lie beside the binary, and
# without peers), progress on stderr, and every kind of bad argument refused with exit status 2.
# Timings are not checked: this machine may be busy.
set -u
convjit="$1"
case_name="$2"
work="$3/bench_$case_name"
rm -rf "$work" && mkdir -p "$work"
export CONVJIT_CACHE_DIR=off

fail() { echo "FAIL [bench $case_name]: $*" >&2; exit 1; }

cat > "$work/shapes.txt" <<'SHAPES'
# name kind N H W IC M KH KW stride pad dilation
tiny_conv  conv 1 6 7 3 4 3 3 2 SAME 1
tiny_dw    dw   1 5 5 3 2 3 3 1 SAME 1
SHAPES

# run_expect STATUS ARGS...: runs `convjit bench`, keeps stdout/stderr, checks the exit status.
run_expect() {
  local want="$1"; shift
  "$convjit" bench "$@" >"$work/out.txt" 2>"$work/err.txt"
  local got=$?
  if [ "$got" -ne "$want" ]; then
    echo "--- stdout:" >&2; cat "$work/out.txt" >&2
    echo "--- stderr:" >&2; cat "$work/err.txt" >&2
    fail "convjit bench $* exited $got, expected $want"
  fi
}
expect_out() { grep -qF -- "$1" "$work/out.txt" || { cat "$work/out.txt" >&2; fail "stdout lacks '$1'"; }; }
expect_err() { grep -qF -- "$1" "$work/err.txt" || { cat "$work/err.txt" >&2; fail "stderr lacks '$1'"; }; }

base=(--shapes "$work/shapes.txt" --threads 1)
quick=("${base[@]}" --min-time-ms 1)

case "$case_name" in
  table)
    run_expect 0 "${quick[@]}" --dtype f32,f64
    expect_out "tiny_conv"
    expect_out "bwd_filter"
    expect_out "dw_bwd_data"
    expect_out "geometric mean"
    # f64 runs on convjit alone (no peer has it) and is checked against the reference.
    grep "tiny_conv .*bwd_data .*f64" "$work/out.txt" | grep -q "ok vs" || fail "f64 row not checked"
    expect_err "[1/6] tiny_conv bwd_data f32 1T"
    expect_err "[6/6] tiny_dw dw_bwd_data f64 1T"
    [ "$(grep -c 'ok vs' "$work/out.txt")" -eq 6 ] || { cat "$work/out.txt"; fail "expected 6 checked rows"; }
    ;;
  csv)
    run_expect 0 "${quick[@]}" --dtype bf16 --only tiny_dw --format csv --no-peers
    [ "$(head -1 "$work/out.txt")" = "shape,op,dtype,threads,impl,layouts,gflops,ms,flops,setup_ms,check,max_rel_error,kernel,note" ] \
      || fail "csv header: $(head -1 "$work/out.txt")"
    [ "$(wc -l < "$work/out.txt")" -eq 2 ] || { cat "$work/out.txt"; fail "one record expected"; }
    expect_out "tiny_dw,dw_bwd_data,bf16,1,convjit,tf,"
    expect_out "ok vs reference"
    ;;
  json)
    run_expect 0 "${quick[@]}" --dtype f32 --format json --markdown "$work/table.md"
    python3 - "$work/out.txt" <<'PY' || fail "json output"
import json, sys
data = json.load(open(sys.argv[1]))
assert data["tool"] == "convjit bench", data["tool"]
rows = data["results"]
mine = [r for r in rows if r["impl"] == "convjit"]
assert len(mine) == 3, mine
for r in mine:
    assert r["gflops"] > 0 and r["ms"] > 0 and r["check"].startswith("ok"), r
    assert r["dtype"] == "f32" and r["threads"] == 1, r
for r in rows:
    assert set(r) >= {"shape", "op", "dtype", "threads", "impl", "layouts", "gflops", "note"}, r
    assert r["note"] or r["gflops"] > 0, r  # a peer either ran or says why not
PY
    grep -q "| tiny_conv | bwd_data | f32 | 1 |" "$work/table.md" || fail "markdown table"
    ;;
  bad_arguments)
    run_expect 2 "${quick[@]}" --only nosuchshape
    expect_err "no shape named nosuchshape"
    expect_err "tiny_conv, tiny_dw"
    run_expect 2 "${base[@]}" --min-time-ms abc
    expect_err "'abc' is not a finite number"
    run_expect 2 "${base[@]}" --min-time-ms -1
    run_expect 2 --shapes "$work/shapes.txt" --threads 0
    run_expect 2 --shapes "$work/shapes.txt" --threads two
    run_expect 2 "${quick[@]}" --dtype f8
    run_expect 2 "${quick[@]}" --format xml
    run_expect 2 "${quick[@]}" --frobnicate
    expect_err "frobnicate"
    run_expect 2 --threads 1
    expect_err "--shapes FILE is required"
    run_expect 2 --shapes "$work/missing.txt"
    expect_err "cannot open"
    printf 'broken conv 1 5x 5 3 4 3 3 1 SAME 1\n' > "$work/broken.txt"
    run_expect 2 --shapes "$work/broken.txt"
    expect_err "broken.txt:1: H '5x' is not a positive integer"
    run_expect 2 "${quick[@]}" --peer-lib "$work/no-such-peer.so"
    expect_err "cannot load peer library"
    run_expect 0 --help
    expect_out "usage: convjit bench --shapes FILE"
    ;;
  *) fail "unknown case" ;;
esac
echo "PASS: bench $case_name"
