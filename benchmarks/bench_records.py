"""The benchmark records of `convjit bench --format json`, benchmarks/tf_peer.py and
benchmarks/run_suite.py, as the table and plot scripts read them."""

import json
import math


def load(paths):
    """The records of every file: a {"results": [...]} object or a bare list."""
    records = []
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        records.extend(data["results"] if isinstance(data, dict) else data)
    return records


def geomean(values):
    """The geometric mean of positive values (NaN for none)."""
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def speedup(convjit_gflops, peer):
    """convjit over the peer of record `peer`. Where the peer's record carries the rate convjit
    had in the same process, timed in turns with it (`convjit_gflops`, tf_peer.py
    --convjit-lib), the ratio of those two; otherwise over `convjit_gflops`, the rate from
    `convjit bench` (which times convjit and the oneDNN peers in turns itself). None where a
    rate is missing."""
    theirs = peer.get("gflops")
    ours = peer.get("convjit_gflops") or convjit_gflops
    return ours / theirs if ours and theirs else None


def best_speedup(convjit_gflops, peers):
    """convjit over the fastest of `peers` (records), each ratio as speedup() takes it: the
    least of them; None where none has a ratio."""
    ratios = [r for r in (speedup(convjit_gflops, p) for p in peers) if r]
    return min(ratios) if ratios else None
