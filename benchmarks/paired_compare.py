#!/usr/bin/env python3
"""Two variants of convjit, paired, on the gradients of a shapes file: is B faster than A?

    benchmarks/paired_compare.py --a OLD/convjit --b build/convjit --shapes FILE
        [--only NAME,..] [--ops data,filter] [--dtype f32] [--threads 2] [--rounds 6]
        [--repeats 30] [--env-a KEY=VALUE ..] [--env-b KEY=VALUE ..]

A variant is an executable and environment variables (the same executable twice with
different --env-a / --env-b compares a setting). For every case both variants run
`convjit run --repeats R` back to back, in an order that alternates from one pair to the
next, and the pair gives one ratio B/A of their rates (from each run's fastest repeat: on a
shared host the fastest run is the least disturbed). A host whose speed drifts between
minutes moves both sides of a pair alike, which comparing medians of separate runs does not
cancel. Per case it prints both variants' median rate, the median ratio and how many pairs B
won, then each variant's best rate over all its runs and the ratio of the two bests; last the
geometric means of both ratios and all pairs won. Where the host's slow spells are long and
deep (AMX kernels falling to a third of their speed for seconds at a time, presumably another
guest's work), many short pairs (--rounds 40 --repeats 3) keep each pair inside one spell: on
such a host an A/A comparison read 0.98-1.02x in median ratio that way, where 12 pairs of 10
repeats read 0.92-1.03x; the bests are a second opinion (0.91-1.04x there). Comparing a
variant with itself (A/A) shows the host's spread: a ratio inside it is no change. Progress
goes to stderr. Kernels are compiled afresh in each run (CONVJIT_ALWAYS_COMPILE=1, no disk
cache), so an environment variable the code generator reads takes effect.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_records import geomean  # noqa: E402
from tf_peer import UsageError, load_shapes  # noqa: E402

# The op of each kind (depthwise or not) and gradient.
OPS = {
    False: {"data": "Conv2DBackpropInput", "filter": "Conv2DBackpropFilter"},
    True: {"data": "DepthwiseConv2dNativeBackpropInput",
           "filter": "DepthwiseConv2dNativeBackpropFilter"},
}


def parse_env(pairs, flag):
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            sys.exit(f"paired_compare: {flag} takes KEY=VALUE, not '{pair}'")
        env[key] = value
    return env


# --dtype's spellings (convjit bench's) and `convjit run`'s.
DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "f64": "float64"}


def run_args(s, op, dtype, threads):
    """`convjit run` flags of gradient `op` of shape `s` (a record of tf_peer.load_shapes)."""
    stride, dilation = s["stride"], s["dilation"]
    return ["run", "--op", OPS[s["depthwise"]][op],
            "--input-sizes", f"{s['n']},{s['h']},{s['w']},{s['ic']}",
            "--filter-sizes", f"{s['kh']},{s['kw']},{s['ic']},{s['m']}",
            "--strides", f"1,{stride},{stride},1", "--dilations", f"1,{dilation},{dilation},1",
            "--padding", "SAME" if s["same"] else "VALID", "--dtype", DTYPES[dtype],
            "--threads", str(threads)]


def rate(exe, env, args, repeats):
    """GFLOP/s of the run's fastest repeat."""
    full_env = dict(os.environ, CONVJIT_CACHE_DIR="off", CONVJIT_ALWAYS_COMPILE="1", **env)
    proc = subprocess.run([exe] + args + ["--repeats", str(repeats)], capture_output=True,
                          text=True, env=full_env)
    fastest = re.search(r"min ([0-9.]+) (us|ms|s)\b", proc.stdout)
    work = re.search(r"\(([0-9.eE+-]+) GFLOP per run\)", proc.stdout)
    if proc.returncode != 0 or not fastest or not work:
        sys.exit(f"paired_compare: {exe} {' '.join(args)} failed "
                 f"(exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    seconds = float(fastest.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[fastest.group(2)]
    return float(work.group(1)) / seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--a", required=True, help="variant A's convjit executable")
    parser.add_argument("--b", required=True, help="variant B's convjit executable")
    parser.add_argument("--env-a", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--env-b", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--shapes", required=True, help="shapes file")
    parser.add_argument("--only", default="", help="comma-separated shape names")
    parser.add_argument("--ops", default="data,filter", help="data, filter or both")
    parser.add_argument("--dtype", default="f32", help="f32, bf16, f16 or f64")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=6, help="pairs per case")
    parser.add_argument("--repeats", type=int, default=30, help="timed runs per convjit run")
    args = parser.parse_args()
    env_a, env_b = parse_env(args.env_a, "--env-a"), parse_env(args.env_b, "--env-b")
    ops = [op for op in args.ops.split(",") if op]
    if not ops or any(op not in ("data", "filter") for op in ops):
        sys.exit(f"paired_compare: --ops takes data and/or filter, not '{args.ops}'")
    if args.dtype not in DTYPES:
        sys.exit(f"paired_compare: --dtype takes f32, bf16, f16 or f64, not '{args.dtype}'")
    if args.threads < 1 or args.rounds < 1 or args.repeats < 1:
        sys.exit("paired_compare: --threads, --rounds and --repeats must be at least 1")
    try:
        shapes = load_shapes(args.shapes)
    except UsageError as e:
        sys.exit(f"paired_compare: {e}")
    if args.only:
        wanted = args.only.split(",")
        unknown = sorted(set(wanted) - {s["name"] for s in shapes})
        if unknown:
            sys.exit(f"paired_compare: not in {args.shapes}: {', '.join(unknown)}")
        shapes = [s for s in shapes if s["name"] in wanted]

    cases = [(s, op) for s in shapes for op in ops]
    print(f"{'shape':30s} {'op':8s} {'A':>8s} {'B':>8s} {'B/A':>7s}  pairs B won "
          f"{'best A':>8s} {'best B':>8s} {'B/A':>7s}")
    median_ratios, best_ratios, won_all, pairs_all = [], [], 0, 0
    for index, (shape, op) in enumerate(cases, 1):
        print(f"[{index}/{len(cases)}] {shape['name']} {op}...", file=sys.stderr, flush=True)
        run = run_args(shape, op, args.dtype, args.threads)
        a_rates, b_rates, ratios = [], [], []
        for pair in range(args.rounds):
            if pair % 2 == 0:
                a = rate(args.a, env_a, run, args.repeats)
                b = rate(args.b, env_b, run, args.repeats)
            else:
                b = rate(args.b, env_b, run, args.repeats)
                a = rate(args.a, env_a, run, args.repeats)
            a_rates.append(a)
            b_rates.append(b)
            ratios.append(b / a)
        median_ratios.append(statistics.median(ratios))
        best_ratios.append(max(b_rates) / max(a_rates))
        won = sum(r > 1 for r in ratios)
        won_all += won
        pairs_all += len(ratios)
        print(f"{shape['name']:30s} {op:8s} {statistics.median(a_rates):8.1f} "
              f"{statistics.median(b_rates):8.1f} {median_ratios[-1]:6.3f}x  "
              f"{f'{won}/{len(ratios)}':>11s} "
              f"{max(a_rates):8.1f} {max(b_rates):8.1f} {best_ratios[-1]:6.3f}x", flush=True)
    if cases:
        print(f"geometric mean of the median ratios {geomean(median_ratios):.3f}x, of the bests' "
              f"{geomean(best_ratios):.3f}x, pairs B won {won_all}/{pairs_all} (GFLOP/s from "
              f"each run's fastest repeat)")


if __name__ == "__main__":
    main()
