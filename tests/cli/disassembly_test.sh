#!/usr/bin/env bash
# `convjit cache show` disassembles a stored kernel through LLVM's shared library, opened with
# dlopen only then: with a libLLVM installed it lists instructions; with none to be found
# (CONVJIT_LLVM_LIBRARY names a missing file) it says so and shows everything else.
# usage: disassembly_test.sh /path/to/convjit
set -u
convjit="$1"
work="$(mktemp -d "${TMPDIR:-/tmp}/convjit-disasm-XXXXXX")"
trap 'rm -rf "$work"' EXIT
export CONVJIT_CACHE_DIR="$work/cache"
unset CONVJIT_ALWAYS_COMPILE CONVJIT_LLVM_LIBRARY
fail() { echo "FAIL: $*"; exit 1; }

"$convjit" run --op conv2d_backprop_input --input-sizes 1,6,6,8 --filter-sizes 3,3,8,8 \
  --strides 1,1,1,1 --padding SAME --repeats 1 > "$work/run" 2>&1 || { cat "$work/run"; fail "run"; }
key=$("$convjit" cache list | awk 'NR==2 {print $1}')
[ -n "$key" ] || fail "no cache entry"

CONVJIT_LLVM_LIBRARY="$work/no-such-libLLVM.so" "$convjit" cache show "$key" > "$work/none" 2>&1 \
  || { cat "$work/none"; fail "show without LLVM"; }
grep -q "disassembly unavailable (LLVM not found)" "$work/none" || { cat "$work/none"; fail "no 'LLVM not found' note"; }
grep -q "scheduled IR:" "$work/none" || fail "show without LLVM lacks the IR"

"$convjit" cache show "$key" > "$work/show" 2>&1 || { cat "$work/show"; fail "show"; }
if ls /usr/lib/x86_64-linux-gnu/libLLVM* /usr/lib/llvm-*/lib/libLLVM* >/dev/null 2>&1; then
  grep -q "disassembly (LLVM MC, Intel syntax)" "$work/show" || { cat "$work/show"; fail "LLVM installed but not used"; }
  grep -Eq "^  0x[0-9a-f]+:  .*(ret|vfmadd|vmov)" "$work/show" || fail "the disassembly lists no instructions"
else
  echo "no libLLVM on this machine: only the fallback was checked"
fi
echo "disassembly: ok"
