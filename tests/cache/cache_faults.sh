#!/usr/bin/env bash
# The disk cache end to end through the `convjit` binary: a cold then warm run, the inspection
# subcommands, and damaged entries / unusable directories that must leave the library working
# and correct with one clear warning.
# usage: cache_faults.sh /path/to/convjit CASE
set -u
convjit="$1"
case_name="$2"
work="$(mktemp -d "${TMPDIR:-/tmp}/convjit-cache-XXXXXX")"
trap 'chmod -R u+rwx "$work" 2>/dev/null; rm -rf "$work"' EXIT
export CONVJIT_CACHE_DIR="$work/cache"
unset CONVJIT_ALWAYS_COMPILE
desc="Conv2DBackpropInput dtype=float32 data_format=NHWC input_sizes=[2,12,12,8] filter=[3,3,8,16] out_backprop=[2,6,6,16] strides=[1,2,2,1] dilations=[1,1,1,1] padding=SAME"

fail() { echo "FAIL: $*"; exit 1; }

# Runs the job with --check; stdout+stderr in $work/last; fails the test unless it passes.
run_job() {
  CONVJIT_VERBOSE=1 "$convjit" run --desc "$desc" --check --repeats 1 --threads 1 > "$work/last" 2>&1 \
    || { cat "$work/last"; fail "convjit run failed"; }
  grep -q "PASS" "$work/last" || { cat "$work/last"; fail "check did not pass"; }
}
# Runs a command with the cache directory read-only for it: a read-only bind mount in a
# private mount namespace (root), else the immutable attribute (root), else chmod 500 (others).
# Exits 77 when none of them works here.
read_only() {
  if [ "$(id -u)" -ne 0 ]; then
    chmod 500 "$CONVJIT_CACHE_DIR"; "$@"; local rc=$?; chmod 700 "$CONVJIT_CACHE_DIR"; return $rc
  fi
  if unshare -m true 2>/dev/null; then
    unshare -m sh -c 'mount --bind -o ro "$0" "$0" && exec "$@"' "$CONVJIT_CACHE_DIR" "$@"
    return $?
  fi
  if chattr +i "$CONVJIT_CACHE_DIR" 2>/dev/null; then
    "$@"; local rc=$?; chattr -i "$CONVJIT_CACHE_DIR"; return $rc
  fi
  return 77
}
compile_source() { grep '^convjit_verbose,compile,' "$work/last" | cut -d, -f5; }
warnings() { grep -c "warning" "$work/last"; }
meta() { ls "$CONVJIT_CACHE_DIR"/*.json | head -1; }
code() { ls "$CONVJIT_CACHE_DIR"/*.code | head -1; }

# A damaged entry: verify reports it (exit 1), the next run warns once, recompiles, passes, and
# the entry is whole again.
expect_recovery() {
  local what="$1"
  "$convjit" cache verify > "$work/verify" 2>&1 && { cat "$work/verify"; fail "$what: verify missed it"; }
  run_job
  [ "$(warnings)" -eq 1 ] || { cat "$work/last"; fail "$what: expected exactly one warning"; }
  grep -q "dropped" "$work/last" || { cat "$work/last"; fail "$what: warning does not say dropped"; }
  [ "$(compile_source)" = "miss" ] || fail "$what: expected a recompile"
  "$convjit" cache verify > /dev/null || fail "$what: entry not rebuilt"
  run_job
  [ "$(compile_source)" = "disk_hit" ] || fail "$what: rebuilt entry not used"
}

case "$case_name" in
  cold_warm)
    run_job
    [ "$(compile_source)" = "miss" ] || fail "first run should compile"
    run_job
    [ "$(compile_source)" = "disk_hit" ] || fail "second run should hit the disk cache"
    grep -q "(cache: disk)" "$work/last" || { cat "$work/last"; fail "cache_source is not disk"; }
    [ "$(warnings)" -eq 0 ] || fail "unexpected warning"
    perms=$(stat -c %a "$CONVJIT_CACHE_DIR")
    [ "$perms" = "700" ] || fail "cache directory mode $perms, expected 700"
    ;;
  inspect)
    run_job
    "$convjit" cache list > "$work/list" || fail "list"
    grep -q "Conv2DBackpropInput" "$work/list" || { cat "$work/list"; fail "list lacks the entry"; }
    key=$(awk 'NR==2 {print $1}' "$work/list")
    "$convjit" cache list --op conv2d_backprop_filter | grep -q "^0 of 1 entries" || fail "filter"
    "$convjit" cache list --json | grep -q '"kernel_name"' || fail "list --json"
    "$convjit" cache show "${key:0:6}" > "$work/show" || fail "show"
    grep -q "scheduled IR:" "$work/show" || fail "show lacks the IR"
    grep -q "^kernel " "$work/show" || fail "show lacks the kernel name"
    grep -q "^disassembly" "$work/show" || fail "show lacks the disassembly section"
    if grep -q "LLVM MC" "$work/show"; then grep -Eq "ret|vfmadd" "$work/show" || fail "disassembly has no instructions"; fi
    "$convjit" cache stats | grep -q "^misses      1" || fail "stats"
    "$convjit" cache verify --run | grep -q "matches the reference" || fail "verify --run"
    # repro prints a command that rebuilds and checks the kernel.
    line=$("$convjit" cache repro "$key") || fail "repro"
    eval "${line/convjit run/\"$convjit\" run}" > "$work/repro" 2>&1 || { cat "$work/repro"; fail "repro command failed"; }
    grep -q PASS "$work/repro" || fail "repro did not check"
    # export, purge, import round trip.
    "$convjit" cache export "$work/all.archive" | grep -q "exported 1 entries" || fail "export"
    "$convjit" cache purge --all | grep -q "removed 1 entries" || fail "purge --all"
    "$convjit" cache list | grep -q "empty" || fail "purge left entries"
    "$convjit" cache import "$work/all.archive" | grep -q "imported 1 entries" || fail "import"
    "$convjit" cache verify > /dev/null || fail "imported entry does not verify"
    run_job
    [ "$(compile_source)" = "disk_hit" ] || fail "imported entry not used"
    "$convjit" cache purge --older-than 1h | grep -q "removed 0 entries" || fail "purge --older-than"
    "$convjit" cache purge --max-bytes 0 | grep -q "removed 1 entries" || fail "purge --max-bytes"
    "$convjit" cache purge > /dev/null 2>&1; [ $? -eq 2 ] || fail "purge without selector is a usage error"
    "$convjit" cache show > /dev/null 2>&1; [ $? -eq 2 ] || fail "show without KEY is a usage error"
    "$convjit" cache frobnicate > /dev/null 2>&1; [ $? -eq 2 ] || fail "unknown subcommand"
    for sub in list show stats verify purge export import repro; do
      "$convjit" cache $sub --help | grep -q "usage: convjit cache $sub" || fail "$sub --help"
    done
    ;;
  empty_and_missing)
    "$convjit" cache list | grep -q "no disk cache at" || fail "missing directory message"
    mkdir -m 700 "$CONVJIT_CACHE_DIR"
    "$convjit" cache list | grep -q "is empty" || fail "empty directory message"
    "$convjit" cache stats > /dev/null || fail "stats on empty"
    "$convjit" cache verify > /dev/null || fail "verify on empty"
    CONVJIT_CACHE_DIR=off "$convjit" cache list | grep -q "off" || fail "off message"
    ;;
  flipped_code)
    run_job
    printf '\xcc\xcc\xcc\xcc' | dd of="$(code)" bs=1 seek=16 conv=notrunc status=none
    expect_recovery "flipped code bytes"
    ;;
  truncated_entry)
    run_job
    truncate -s 7 "$(code)"
    expect_recovery "truncated code"
    ;;
  garbage_metadata)
    run_job
    head -c 300 /dev/urandom > "$(meta)"
    expect_recovery "garbage metadata"
    ;;
  other_version)
    run_job
    sed -i 's/"library_version": "[^"]*"/"library_version": "0.0.0-older"/' "$(meta)"
    expect_recovery "entry of another version"
    ;;
  foreign_directory)
    # World-writable: anyone could plant code there.
    mkdir -m 777 "$CONVJIT_CACHE_DIR"; chmod 777 "$CONVJIT_CACHE_DIR"
    run_job
    [ "$(warnings)" -eq 1 ] || { cat "$work/last"; fail "expected one warning"; }
    grep -q "disk kernel cache disabled" "$work/last" || fail "warning text"
    [ -z "$(ls -A "$CONVJIT_CACHE_DIR")" ] || fail "wrote into a refused directory"
    "$convjit" cache list > /dev/null 2>&1; [ $? -eq 1 ] || fail "list on a refused directory must exit 1"
    # A symlink to another user's directory (root can make one; others skip this half).
    if [ "$(id -u)" -eq 0 ]; then
      mkdir -m 700 "$work/theirs" && chown 4242:4242 "$work/theirs"
      ln -s "$work/theirs" "$work/link"
      CONVJIT_CACHE_DIR="$work/link" run_job
      [ "$(warnings)" -eq 1 ] || { cat "$work/last"; fail "symlink: expected one warning"; }
      grep -q "owned by uid 4242" "$work/last" || { cat "$work/last"; fail "symlink: warning text"; }
    fi
    ;;
  read_only_directory)
    run_job
    if [ "$(id -u)" -eq 0 ]; then echo "SKIP half: root ignores directory permissions (the unit tests inject EROFS)"; exit 0; fi
    chmod 500 "$CONVJIT_CACHE_DIR"
    run_job
    [ "$(compile_source)" = "disk_hit" ] || fail "read-only cache still serves hits"
    desc="${desc/input_sizes=\[2,/input_sizes=[3,}"; desc="${desc/out_backprop=\[2,/out_backprop=[3,}"
    run_job
    [ "$(warnings)" -eq 1 ] || { cat "$work/last"; fail "expected one warning for the failed store"; }
    ;;
  purge_read_only)
    # A cache nobody can change: purge reports what it really removed (nothing) and fails.
    run_job
    read_only "$convjit" cache purge --all > "$work/purge" 2> "$work/purge.err"
    rc=$?
    [ $rc -eq 77 ] && { echo "SKIP: no way to make a read-only directory here"; exit 0; }
    [ $rc -eq 1 ] || { cat "$work/purge" "$work/purge.err"; fail "purge on a read-only cache exited $rc"; }
    grep -q "removed 0 entries" "$work/purge" || { cat "$work/purge"; fail "purge claims removals"; }
    grep -q "could not remove 1 entry" "$work/purge.err" || { cat "$work/purge.err"; fail "purge error text"; }
    "$convjit" cache list | grep -q "^1 of 1 entries" || fail "the entry should still be there"
    "$convjit" cache purge --all | grep -q "removed 1 entries" || fail "purge once writable"
    ;;
  full_directory)
    # A size limit well below what the runs below store: every store evicts the least recently
    # used entries first, the directory never exceeds it, and what is left verifies.
    export CONVJIT_CACHE_MAX_BYTES=60K
    for w in 12 13 14 15 16 17 18 19 20 21; do
      desc="Conv2DBackpropInput dtype=float32 data_format=NHWC input_sizes=[2,12,$w,8] filter=[3,3,8,16] out_backprop=[2,6,$(( (w + 1) / 2 )),16] strides=[1,2,2,1] dilations=[1,1,1,1] padding=SAME"
      run_job
      size=$(du -sb "$CONVJIT_CACHE_DIR" | cut -f1)
      [ "$size" -le $((60 * 1024 + 4096)) ] || fail "directory holds $size bytes, over the limit"
    done
    "$convjit" cache verify > "$work/verify" || { cat "$work/verify"; fail "verify after evictions"; }
    "$convjit" cache list > "$work/list"
    grep -q "12x21x8" "$work/list" || { cat "$work/list"; fail "the newest entry was evicted"; }
    grep -q "12x12x8" "$work/list" && { cat "$work/list"; fail "the oldest entry was kept"; }
    entries=$(grep -c "Conv2DBackpropInput" "$work/list")
    [ "$entries" -ge 2 ] && [ "$entries" -lt 10 ] || { cat "$work/list"; fail "$entries entries kept"; }
    ;;
  writable_parent)
    # A parent others may write (without the sticky bit) lets them replace the cache directory.
    for mode in 777 770; do
      rm -rf "$work/shared"; mkdir -m "$mode" "$work/shared"; chmod "$mode" "$work/shared"
      mkdir -m 700 "$work/shared/cache"
      CONVJIT_CACHE_DIR="$work/shared/cache" run_job
      [ "$(warnings)" -eq 1 ] || { cat "$work/last"; fail "mode $mode: expected one warning"; }
      grep -q "above the cache is writable by group or others" "$work/last" \
        || { cat "$work/last"; fail "mode $mode: warning text"; }
      [ -z "$(ls -A "$work/shared/cache")" ] || fail "mode $mode: wrote into a refused directory"
      CONVJIT_CACHE_DIR="$work/shared/cache" "$convjit" cache list > /dev/null 2>&1
      [ $? -eq 1 ] || fail "mode $mode: list on a refused directory must exit 1"
    done
    # Sticky, like /tmp: fine.
    rm -rf "$work/shared"; mkdir -m 1777 "$work/shared"; chmod 1777 "$work/shared"
    CONVJIT_CACHE_DIR="$work/shared/cache" run_job
    [ "$(warnings)" -eq 0 ] || { cat "$work/last"; fail "sticky parent: unexpected warning"; }
    [ "$(compile_source)" = "miss" ] || fail "sticky parent: cache not used"
    ;;
  swapped_directory)
    run_job
    # The cache directory replaced by a link to a place another user controls: refused, and
    # the planted place is never written.
    mkdir -m 700 "$work/planted"
    mv "$CONVJIT_CACHE_DIR" "$work/moved"
    chmod 770 "$work/planted"  # writable by a group: someone else could plant code in it
    ln -s "$work/planted" "$CONVJIT_CACHE_DIR"
    run_job
    [ "$(warnings)" -eq 1 ] || { cat "$work/last"; fail "link to a group-writable place: one warning"; }
    grep -q "through a symlink" "$work/last" || { cat "$work/last"; fail "warning text"; }
    [ -z "$(ls -A "$work/planted")" ] || fail "wrote into the planted directory"
    if [ "$(id -u)" -eq 0 ]; then
      # A link another user made, even to a private directory of ours.
      chmod 700 "$work/planted"
      rm "$CONVJIT_CACHE_DIR"; ln -s "$work/moved" "$CONVJIT_CACHE_DIR"; chown -h 4242:4242 "$CONVJIT_CACHE_DIR"
      run_job
      [ "$(warnings)" -eq 1 ] || { cat "$work/last"; fail "foreign link: one warning"; }
      grep -q "symlink owned by uid 4242" "$work/last" || { cat "$work/last"; fail "foreign link text"; }
    fi
    # Our own link to our own private directory is used.
    rm "$CONVJIT_CACHE_DIR"; ln -s "$work/moved" "$CONVJIT_CACHE_DIR"
    run_job
    [ "$(compile_source)" = "disk_hit" ] || { cat "$work/last"; fail "own link: the moved cache is not used"; }
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
