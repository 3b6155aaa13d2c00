#!/usr/bin/env bash
# Installs a configured and built convjit into a temporary prefix and checks it as a packager
# and a user would:
#   - libconvjit exports only the C ABI (convjit_*) and the C++ API (convjit::, not its
#     internal namespaces), and needs nothing but the C and C++ runtimes at run time;
#   - the installed `convjit` (and convjit-bench) start from the prefix with no environment,
#     need neither LLVM nor oneDNN (the bench alone needs oneDNN), and run a kernel;
#   - no installed file names the source or build directory;
#   - a consumer project finds it with find_package(convjit) and one with pkg-config, both
#     C++17 (and the C ABI from C11), and both run.
# usage: install_test.sh BUILD_DIR SOURCE_DIR [static]
#   static: the build has CONVJIT_STATIC=ON (libconvjit.a; no symbol or ldd checks of a .so,
#   no command line to run)
set -euo pipefail

build="$(cd "$1" && pwd)"
source_dir="$(cd "$2" && pwd)"
mode="${3:-shared}"
work="$(mktemp -d "${TMPDIR:-/tmp}/convjit-install-XXXXXX")"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
failures=0
fail() { echo "FAILED: $*" >&2; failures=$((failures + 1)); }

cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; exit 1; }
libdir="$(dirname "$(find "$prefix" -name 'libconvjit.*' | head -1)")"
[ -d "$libdir" ] || { echo "FAILED: no libconvjit installed under $prefix" >&2; exit 1; }
for f in include/convjit/convjit.h include/convjit/convjit.hpp include/convjit/types.hpp include/convjit/numeric.hpp \
         include/convjit/cache.h include/convjit/version.h share/doc/convjit/LICENSE; do
  [ -f "$prefix/$f" ] || fail "$f is not installed"
done
[ -f "$libdir/pkgconfig/convjit.pc" ] || fail "convjit.pc is not installed"
[ -f "$libdir/cmake/convjit/convjitConfig.cmake" ] || fail "the CMake package is not installed"
if find "$prefix/include" -name '*.in' | grep -q .; then fail "a .in template was installed"; fi

# ---- exported symbols and run-time dependencies of the shared library
if [ "$mode" = shared ]; then
  so="$libdir/libconvjit.so"
  [ -L "$so" ] && [ -f "$libdir/libconvjit.so.0" ] || fail "libconvjit.so / .so.0 links missing"
  # Allowed: the C ABI, the C++ API (classes and functions directly in namespace convjit, never
  # a lower-case sub-namespace such as convjit::detail or convjit::disk_cache), the type
  # information of its classes, and the version node.
  nm -D --defined-only -C "$so" | awk '{ $1 = ""; $2 = ""; sub(/^  /, ""); print }' \
    | sed 's/@@CONVJIT_0$//' >"$work/symbols"
  grep -Ev '^(convjit_[a-z0-9_]+|convjit::.*|(typeinfo|typeinfo name|vtable) for convjit::[A-Z][A-Za-z0-9_]*|CONVJIT_0)$' \
    "$work/symbols" >"$work/unexpected" || true
  grep -E '^convjit::[a-z_][a-z0-9_]*::' "$work/symbols" >>"$work/unexpected" || true
  if [ -s "$work/unexpected" ]; then
    fail "libconvjit.so exports symbols outside its API:"
    head -20 "$work/unexpected" >&2
  fi
  for wanted in convjit_compile convjit_run convjit_version convjit_cache_list_json \
                'convjit::compile(' 'convjit::Kernel::run(' 'convjit::float_to_bfloat16(' \
                'typeinfo for convjit::Error'; do
    grep -qF "$wanted" "$work/symbols" || fail "libconvjit.so does not export $wanted"
  done
  echo "exported symbols: $(wc -l <"$work/symbols") (C ABI and C++ API only)"

  # Run-time dependencies: the C and C++ runtimes only.
  ldd "$so" | awk '{ print $1 }' >"$work/needed"
  if grep -Ev '^(linux-vdso\.so\.1|/lib64/ld-linux-x86-64\.so\.2|lib(c|m|dl|pthread|rt|gcc_s|stdc\+\+)\.so\.[0-9]+)$' \
       "$work/needed" >"$work/extra"; then
    fail "libconvjit.so needs more than the C/C++ runtime: $(tr '\n' ' ' <"$work/extra")"
  fi

  # ---- the installed command line, from the prefix, with a clean environment
  cli="$prefix/bin/convjit"
  [ -x "$cli" ] || fail "bin/convjit is not installed"
  if ldd "$cli" | grep -Ei 'llvm|dnnl|not found'; then fail "bin/convjit needs LLVM, oneDNN or a missing library"; fi
  run_clean() { env -i PATH=/usr/bin:/bin HOME="$work/home" CONVJIT_CACHE_DIR=off "$@"; }
  version="$(run_clean "$cli" --version)" || fail "bin/convjit --version does not run"
  [[ "$version" == "convjit "* ]] || fail "bin/convjit --version printed '$version'"
  run_clean "$cli" run --op conv2d_backprop_input --input-sizes 1,8,8,4 --filter-sizes 3,3,4,4 \
    --strides 1,1,1,1 --padding SAME --repeats 1 --check >"$work/run.log" 2>&1 \
    || { cat "$work/run.log" >&2; fail "bin/convjit run --check failed"; }
  grep -q "PASS" "$work/run.log" || fail "bin/convjit run printed no PASS"
  if [ -x "$prefix/bin/convjit-bench" ]; then
    readelf -d "$prefix/bin/convjit-bench" | grep -q 'R.*PATH.*\$ORIGIN/\.\./lib' \
      || fail "convjit-bench has no \$ORIGIN/../lib RPATH"
    run_clean "$prefix/bin/convjit-bench" --help >/dev/null 2>&1 || fail "bin/convjit-bench does not start"
    run_clean "$cli" bench --help >/dev/null 2>&1 || fail "bin/convjit bench does not run convjit-bench"
  fi
fi

# ---- no build paths in installed files
if grep -rlF -e "$source_dir" -e "$build" "$prefix" >"$work/paths"; then
  fail "installed files name the source or build directory: $(tr '\n' ' ' <"$work/paths")"
fi

# ---- consumers: find_package and pkg-config, C++17 (and C11 for the C ABI)
cmake -S "$source_dir/tests/install/consumer" -B "$work/consumer-cmake" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >"$work/consumer.log" 2>&1 \
  && cmake --build "$work/consumer-cmake" >>"$work/consumer.log" 2>&1 \
  || { cat "$work/consumer.log" >&2; fail "the find_package(convjit) consumer does not build"; }
if [ -x "$work/consumer-cmake/consumer" ]; then
  env -u LD_LIBRARY_PATH CONVJIT_CACHE_DIR=off "$work/consumer-cmake/consumer" \
    || fail "the find_package(convjit) consumer failed"
fi

export PKG_CONFIG_PATH="$libdir/pkgconfig"
pc_cflags="$(pkg-config --cflags convjit)" && pc_libs="$(pkg-config --libs convjit)" \
  && pc_libdir="$(pkg-config --variable=libdir convjit)" || fail "pkg-config does not know convjit"
[ "$(cd "$pc_libdir" && pwd)" = "$(cd "$libdir" && pwd)" ] || fail "pkg-config libdir $pc_libdir is not $libdir"
# shellcheck disable=SC2086
if c++ -std=c++17 -Wall -Wextra -Werror $pc_cflags "$source_dir/tests/install/consumer/consumer.cpp" \
     -o "$work/consumer-pc" $pc_libs -Wl,-rpath,"$pc_libdir" -pthread 2>"$work/pc.log"; then
  CONVJIT_CACHE_DIR=off "$work/consumer-pc" || fail "the pkg-config consumer failed"
else
  cat "$work/pc.log" >&2
  fail "the pkg-config consumer does not build"
fi
# shellcheck disable=SC2086
if cc -std=c11 -Wall -Werror $pc_cflags "$source_dir/tests/c_api/c_api_test.c" -o "$work/c-consumer" \
     $pc_libs -Wl,-rpath,"$pc_libdir" -lm -lstdc++ -pthread 2>"$work/c.log"; then
  CONVJIT_CACHE_DIR=off "$work/c-consumer" || fail "the C consumer failed"
else
  cat "$work/c.log" >&2
  fail "the C consumer does not build against convjit.h"
fi

if [ "$failures" -ne 0 ]; then
  echo "install test ($mode): $failures failure(s)" >&2
  exit 1
fi
echo "install test ($mode): every check passed"
