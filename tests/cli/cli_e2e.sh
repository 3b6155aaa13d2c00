#!/usr/bin/env bash
# End-to-end tests of the `convjit` binary, one case per ctest entry:
#   cli_e2e.sh <path to convjit> <case> <scratch dir>
# Each case runs the binary as a user would and checks its exit status and output.
set -u
convjit="$1"
case_name="$2"
work="$3/$case_name"
rm -rf "$work" && mkdir -p "$work"

fail() { echo "FAIL [$case_name]: $*" >&2; exit 1; }

# run_expect STATUS ARGS...: runs convjit, keeps stdout/stderr in $work, checks the exit status.
run_expect() {
  local want="$1"; shift
  "$convjit" "$@" >"$work/out.txt" 2>"$work/err.txt"
  local got=$?
  if [ "$got" -ne "$want" ]; then
    echo "--- stdout:" >&2; cat "$work/out.txt" >&2
    echo "--- stderr:" >&2; cat "$work/err.txt" >&2
    fail "convjit $* exited $got, expected $want"
  fi
}

expect_out() { grep -qF -- "$1" "$work/out.txt" || { cat "$work/out.txt" >&2; fail "stdout lacks '$1'"; }; }
expect_err() { grep -qF -- "$1" "$work/err.txt" || { cat "$work/err.txt" >&2; fail "stderr lacks '$1'"; }; }

# check_run ARGS...: a small run with --check must pass and print every report line.
check_run() {
  run_expect 0 run "$@" --check --repeats 2
  for key in descriptor backend kernel compile run GFLOP/s; do expect_out "$key"; done
  expect_out ": PASS"
}

# make_npy FILE HEADER DATA_BYTES: a version 1.0 .npy file with that header and zero data.
make_npy() {
  local len=${#2}
  { printf '\x93NUMPY\x01\x00'; printf "\\x$(printf %02x $((len % 256)))\\x$(printf %02x $((len / 256)))";
    printf '%s' "$2"; head -c "$3" /dev/zero; } > "$1"
}

# npy_descr FILE: the 'descr' of a .npy header.
npy_descr() { head -c 128 "$1" | tr -d '\0' | grep -ao "'descr': '[^']*'" | head -1; }

case "$case_name" in
  help)
    run_expect 0 --help; expect_out "run"
    run_expect 0 run --help; expect_out "--input-sizes"; expect_out "exit status"
    run_expect 2 frobnicate; expect_err "unknown command"
    ;;
  backprop_input)
    check_run --op Conv2DBackpropInput --input-sizes 2,7,6,5 --filter-sizes 3,3,5,4 \
      --strides 1,2,2,1 --padding SAME
    expect_out "Conv2DBackpropInput"
    check_run --op conv2d_backprop_input --input-sizes 1,3,8,8 --filter-sizes 2,2,3,2 \
      --padding EXPLICIT --explicit-paddings 0,0,0,0,1,0,0,2 --data-format NCHW --dtype float64
    # Grouped: input depth 4 = 2 groups of filter depth 2.
    check_run --op Conv2DBackpropInput --input-sizes 1,5,5,4 --filter-sizes 3,3,2,6 --padding VALID \
      --dilations 1,1,1,1
    ;;
  backprop_input_v2)
    check_run --op Conv2DBackpropInputV2 --input-sizes 1,6,6,3 --filter-sizes 3,3,3,2 \
      --strides 1,1,1,1 --padding SAME --dilations 1,2,2,1
    ;;
  backprop_filter)
    check_run --op Conv2DBackpropFilter --input-sizes 2,9,8,3 --filter-sizes 3,2,3,4 \
      --strides 1,2,1,1 --padding VALID
    check_run --op conv2d_backprop_filter --input-sizes 1,6,6,2 --filter-sizes 3,3,2,3 --padding SAME \
      --dtype half
    ;;
  depthwise_backprop_input)
    check_run --op DepthwiseConv2dNativeBackpropInput --input-sizes 2,7,7,3 --filter-sizes 3,3,3,2 \
      --strides 1,2,2,1 --padding SAME
    ;;
  depthwise_backprop_filter)
    check_run --op DepthwiseConv2dNativeBackpropFilter --input-sizes 1,6,5,4 --filter-sizes 2,2,4,1 \
      --padding VALID --dtype bfloat16
    ;;
  forward)
    check_run --op Conv2D --input-sizes 2,6,6,3 --filter-sizes 3,3,3,4 --strides 1,2,2,1 --padding SAME
    check_run --op DepthwiseConv2dNative --input-sizes 1,6,6,3 --filter-sizes 3,3,3,2 --padding VALID
    ;;
  desc_round_trip)
    check_run --op Conv2DBackpropInput --input-sizes 1,5,5,2 --filter-sizes 2,2,2,3 --strides 1,2,2,1 \
      --padding VALID
    desc=$(sed -n 's/^descriptor  //p' "$work/out.txt")
    [ -n "$desc" ] || fail "no descriptor line"
    check_run --desc "$desc"
    desc2=$(sed -n 's/^descriptor  //p' "$work/out.txt")
    [ "$desc" = "$desc2" ] || fail "descriptor changed: '$desc' vs '$desc2'"
    ;;
  npy_io)
    # Conv2D writes y.npy; it becomes out_backprop of the backprop ops, whose input comes from x.
    check_run --op Conv2D --input-sizes 1,6,6,2 --filter-sizes 3,3,2,3 --padding SAME --output "$work/x.npy"
    [ "$(npy_descr "$work/x.npy")" = "'descr': '<f4'" ] || fail "x.npy is not float32"
    check_run --op Conv2D --input "$work/x.npy" --filter-sizes 3,3,3,4 --padding VALID --output "$work/y.npy"
    check_run --op Conv2DBackpropFilter --input "$work/x.npy" --filter-sizes 3,3,3,4 \
      --out-backprop "$work/y.npy" --padding VALID --output "$work/dw.npy"
    expect_out "[1,4,4,4]"
    [ -s "$work/dw.npy" ] || fail "dw.npy not written"
    # bfloat16 op from float32 files: rounded on load, written back as float32.
    check_run --op Conv2DBackpropFilter --input "$work/x.npy" --filter-sizes 3,3,3,4 \
      --out-backprop "$work/y.npy" --padding VALID --dtype bfloat16 --output "$work/dw_bf16.npy"
    [ "$(npy_descr "$work/dw_bf16.npy")" = "'descr': '<f4'" ] || fail "bfloat16 result not float32"
    check_run --op Conv2DBackpropInput --input-sizes 1,6,6,3 --filter-sizes 3,3,3,4 \
      --out-backprop "$work/y.npy" --padding VALID --dtype half --output "$work/dx.npy"
    [ "$(npy_descr "$work/dx.npy")" = "'descr': '<f2'" ] || fail "half result not float16"
    # A half file feeds a half op with no --dtype.
    check_run --op Conv2D --input "$work/dx.npy" --filter-sizes 1,1,3,1 --padding VALID
    expect_out "dtype=half"
    ;;
  bad_input)
    # TensorFlow's own messages, exit status 1.
    run_expect 1 run --op Conv2DBackpropInput --input-sizes 1,4,4,2 --filter-sizes 3,3,2,2 \
      --strides 1,1,1 --padding SAME
    expect_err "Sliding window strides field must specify 4 dimensions"
    run_expect 1 run --op Conv2DBackpropInput --input-sizes 1,4,4 --filter-sizes 3,3,2,2 --padding SAME
    expect_err "Conv2DBackpropInput requires input_sizes to contain 4 values or 2 values, but got: 3"
    run_expect 1 run --op Conv2DBackpropFilter --input-sizes 1,4,4,0 --filter-sizes 3,3,0,2 --padding SAME
    expect_err "filter depth must be strictly greated than zero"
    run_expect 1 run --op Conv2D --input-sizes 1,4,4,2 --filter-sizes 3,3,2,2 --padding same
    expect_err "Value for attr 'padding' of \"same\""
    # Usage errors, exit status 2, naming the missing flag.
    run_expect 2 run --op Conv2DBackpropInput --filter-sizes 3,3,2,2 --padding SAME
    expect_err "--input-sizes"
    run_expect 2 run --op Conv2D --bogus 1
    expect_err "unknown flag --bogus"
    # A malformed .npy file, exit status 1 with the file's problem.
    make_npy "$work/short.npy" "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }" 8
    run_expect 1 run --op Conv2D --input "$work/short.npy" --filter-sizes 1,1,1,1 --padding SAME
    expect_err "truncated"
    make_npy "$work/int.npy" "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }" 8
    run_expect 1 run --op Conv2D --input "$work/int.npy" --filter-sizes 1,1,1,1 --padding SAME
    expect_err "unsupported dtype '<i4'"
    # Absurd sizes with a scalar out_backprop: TensorFlow's rank error, never a crash.
    make_npy "$work/scalar.npy" "{'descr': '<f4', 'fortran_order': False, 'shape': (), }" 4
    run_expect 1 run --op Conv2DBackpropInput --input-sizes 65534,65534 --filter-sizes 1,1,1,1 \
      --padding VALID --out-backprop "$work/scalar.npy"
    expect_err "4-dimensional"
    ;;
  cuda_interpret)
    # The CUDA backend's kernels on the host: every op kind once, checked against the reference.
    check_run --device cuda-interpret --op Conv2DBackpropInput --input-sizes 2,9,8,6 \
      --filter-sizes 3,3,6,5 --strides 1,2,2,1 --padding SAME
    expect_out "backend     cuda (interpreted)"; expect_out "kernel      cuda_sm80_f32_bwd_data"
    check_run --device cuda-interpret --op Conv2DBackpropFilter --input-sizes 1,4,7,7 \
      --filter-sizes 3,3,4,6 --padding VALID --dtype bfloat16 --data-format NCHW
    check_run --device cuda-interpret --op DepthwiseConv2dNativeBackpropInput --input-sizes 1,6,6,3 \
      --filter-sizes 3,3,3,2 --padding SAME --dtype half
    check_run --device cuda-interpret --op Conv2D --input-sizes 1,6,6,8 --filter-sizes 3,3,8,8 \
      --padding SAME --math tf32
    expect_out "f32_tf32_fwd"
    # CONVJIT_CUDA_INTERPRET=1 turns device cuda into the interpret mode.
    CONVJIT_CUDA_INTERPRET=1 run_expect 0 run --device cuda --op Conv2D --input-sizes 1,4,4,2 \
      --filter-sizes 2,2,2,2 --padding VALID --check --repeats 1
    expect_out "(interpreted)"
    ;;
  cuda_compile)
    # Compile for named GPUs without one: name, registers, spills, shared memory, source.
    run_expect 0 compile --target sm_80 --op Conv2DBackpropFilter --input-sizes 2,16,16,32 \
      --filter-sizes 3,3,32,64 --padding SAME --dtype half
    for key in "kernel      cuda_sm80_f16_bwd_filter" "registers/thread" "spills 0 B stored 0 B loaded" \
               "shared" "NVRTC"; do expect_out "$key"; done
    run_expect 0 compile --target sm_90a --op Conv2D --input-sizes 1,8,8,4 --filter-sizes 3,3,4,4 \
      --padding SAME --source
    expect_out "cuda_sm90a_f32_fwd"; expect_out "CJ_KERNEL void"
    if grep -q "#include" "$work/out.txt"; then fail "generated source has an #include"; fi
    run_expect 0 compile --target sm_80 --op Conv2D --input-sizes 1,8,8,4 --filter-sizes 3,3,4,4 \
      --padding SAME --plan algo=direct,threads=64 --json
    expect_out '"kernel": "cuda_sm80_f32_fwd_nhwc_direct_t64"'
    run_expect 0 compile --target avx2 --op Conv2D --input-sizes 1,8,8,4 --filter-sizes 3,3,4,4 --padding SAME
    expect_out "kernel      x86_avx2"
    run_expect 2 compile --target sm_99 --op Conv2D --input-sizes 1,8,8,4 --filter-sizes 3,3,4,4 --padding SAME
    expect_err "unknown CUDA target 'sm_99'"
    run_expect 1 compile --target sm_80 --op Conv2D --input-sizes 1,8,8,4 --filter-sizes 3,3,4,4 \
      --padding SAME --plan algo=mma
    expect_err "algo=mma needs"
    run_expect 2 compile --op Conv2D --input-sizes 1,8,8,4 --filter-sizes 3,3,4,4 --padding SAME
    expect_err "--target is required"
    run_expect 2 compile --target sm_80 --op Conv2D --input-sizes 1,8,8,4 --filter-sizes 3,3,4,4 \
      --padding SAME --threads 2
    expect_err "--threads applies to the CPU targets"
    ;;
  cpu_compile)
    # Compile for an x86 target without running: the kernel of the thread count asked for, and
    # a digest of its code that is the same from one process to the next.
    filter_gradient=(--op Conv2DBackpropFilter --input-sizes 8,14,14,256 --filter-sizes 1,1,256,256
                     --padding VALID)
    run_expect 0 compile --target avx512 "${filter_gradient[@]}" --threads 2
    expect_out ", 2 threads"; expect_out "kernel      x86_avx512_f32_bwd_filter"; expect_out "par="
    first_digest=$(grep -o 'xxh3 [0-9a-f]\{16\}' "$work/out.txt") || fail "no code digest"
    run_expect 0 compile --target avx512 "${filter_gradient[@]}" --threads 2
    expect_out "$first_digest"
    run_expect 0 compile --target avx2 "${filter_gradient[@]}" --json
    expect_out '"threads": 1'; expect_out '"code_xxh3": "'; expect_out '"kernel": "x86_avx2_f32_bwd_filter'
    if grep -q "par=" "$work/out.txt"; then fail "a one-thread kernel has a parallel loop"; fi
    # Flags only a run reads are refused, not ignored.
    run_expect 2 compile --target avx2 "${filter_gradient[@]}" --repeats 3
    expect_err "--repeats is a flag of convjit run"
    run_expect 2 compile --target avx2 "${filter_gradient[@]}" --seed=4
    expect_err "--seed is a flag of convjit run"
    run_expect 2 compile --target avx2 "${filter_gradient[@]}" --out-backprop=dy.npy
    expect_err "--out-backprop is a flag of convjit run"
    run_expect 2 compile --target avx2 "${filter_gradient[@]}" --threads 0
    expect_err "--threads must be between 1 and 4096"
    ;;
  cuda_no_device)
    # Without a GPU, device cuda is a clear error, never a crash (skipped where a GPU exists).
    if "$convjit" run --device cuda --op Conv2D --input-sizes 1,4,4,2 --filter-sizes 2,2,2,2 \
         --padding VALID --repeats 1 >"$work/out.txt" 2>"$work/err.txt"; then
      echo "ok [$case_name] (a CUDA device is present: nothing to check)"; exit 0
    fi
    expect_err "no CUDA device: "
    ;;
  *)
    fail "unknown case"
    ;;
esac
echo "ok [$case_name]"
