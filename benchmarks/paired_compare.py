#!/usr/bin/env python3
"""Two variants of convjit, paired, on the gradients of a shapes file: is B faster than A?

    benchmarks/paired_compare.py --a OLD/convjit --b build/convjit --shapes FILE
        [--only NAME,..] [--ops data,filter] [--threads 2] [--rounds 6] [--repeats 30]
        [--env-a KEY=VALUE ..] [--env-b KEY=VALUE ..]

A variant is an executable and environment variables (the same executable twice with
different --env-a / --env-b compares a setting). For every case both variants run
`convjit run --repeats R` back to back, in an order that alternates from one pair to the
next, and the pair gives one ratio B/A of their rates (from each run's fastest repeat: on a
shared host the fastest run is the least disturbed). A host whose speed drifts between
minutes moves both sides of a pair alike, which comparing medians of separate runs does not
cancel. Per case it prints both variants' median rate, the median ratio and how many pairs B
won; last the geometric mean of the median ratios and all pairs won. Comparing a variant
with itself (A/A) shows the host's spread: a ratio inside it is no change. Progress goes to
stderr. Kernels are compiled afresh in each run (CONVJIT_ALWAYS_COMPILE=1, no disk cache), so
an environment variable the code generator reads takes effect.
"""
import argparse
import math
import os
import re
import statistics
import subprocess
import sys

OPS = {
    "conv": {"data": "Conv2DBackpropInput", "filter": "Conv2DBackpropFilter"},
    "dw": {"data": "DepthwiseConv2dNativeBackpropInput",
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


def read_shapes(path):
    shapes = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            fields = line.split()
            if not fields or fields[0].startswith("#"):
                continue
            if len(fields) != 12 or fields[1] not in OPS:
                sys.exit(f"paired_compare: {path}:{number}: expected 'name conv|dw N H W IC M KH KW "
                         f"stride pad dilation'")
            shapes.append(fields)
    return shapes


def run_args(fields, op, threads):
    name, kind, n, h, w, ic, m, kh, kw, stride, pad, dil = fields
    return ["run", "--op", OPS[kind][op], "--input-sizes", f"{n},{h},{w},{ic}",
            "--filter-sizes", f"{kh},{kw},{ic},{m}", "--strides", f"1,{stride},{stride},1",
            "--dilations", f"1,{dil},{dil},1", "--padding", pad, "--threads", str(threads)]


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
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=6, help="pairs per case")
    parser.add_argument("--repeats", type=int, default=30, help="timed runs per convjit run")
    args = parser.parse_args()
    env_a, env_b = parse_env(args.env_a, "--env-a"), parse_env(args.env_b, "--env-b")
    ops = [op for op in args.ops.split(",") if op]
    if not ops or any(op not in ("data", "filter") for op in ops):
        sys.exit(f"paired_compare: --ops takes data and/or filter, not '{args.ops}'")
    if args.threads < 1 or args.rounds < 1 or args.repeats < 1:
        sys.exit("paired_compare: --threads, --rounds and --repeats must be at least 1")
    shapes = read_shapes(args.shapes)
    if args.only:
        wanted = args.only.split(",")
        unknown = sorted(set(wanted) - {s[0] for s in shapes})
        if unknown:
            sys.exit(f"paired_compare: not in {args.shapes}: {', '.join(unknown)}")
        shapes = [s for s in shapes if s[0] in wanted]

    cases = [(s, op) for s in shapes for op in ops]
    print(f"{'shape':30s} {'op':8s} {'A':>8s} {'B':>8s} {'B/A':>7s}  pairs B won")
    log_sum, won_all, pairs_all = 0.0, 0, 0
    for index, (fields, op) in enumerate(cases, 1):
        print(f"[{index}/{len(cases)}] {fields[0]} {op}...", file=sys.stderr, flush=True)
        run = run_args(fields, op, args.threads)
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
        median_ratio = statistics.median(ratios)
        won = sum(r > 1 for r in ratios)
        log_sum += math.log(median_ratio)
        won_all += won
        pairs_all += len(ratios)
        print(f"{fields[0]:30s} {op:8s} {statistics.median(a_rates):8.1f} "
              f"{statistics.median(b_rates):8.1f} {median_ratio:6.3f}x  {won}/{len(ratios)}",
              flush=True)
    if cases:
        print(f"geometric mean of the median ratios {math.exp(log_sum / len(cases)):.3f}x, "
              f"pairs B won {won_all}/{pairs_all} (GFLOP/s from each run's fastest repeat)")


if __name__ == "__main__":
    main()
