#!/usr/bin/env python3
"""convjit's share of the FMA peak on the compute-bound layers of a benchmark run.

The CPU issue's target: the 3x3 and 1x1 layers with at least 64 input and output channels at
85% or more of the host's measured FMA peak, counting only the multiply-adds that touch real
data (padding taps excluded). For every such gradient (input and filter) of convjit in the
JSON records of `convjit bench` / run_suite.py, this counts the taps that land inside the
input, turns the run's time into that rate, and divides by the peak the benchmark measured at
its start (each record's `peak_percent` says which: that of the unit the kernel multiplies
on, the f32 FMAs, `vdpbf16ps`, or AMX's `tdpbf16ps` for bf16 input gradients on a host with
AMX). Prints per dtype and thread count the median, the cases at 85% or more, and
the lowest.

  benchmarks/peak_share.py networks.json [--shapes ../shared/bench/networks.txt]
"""
import argparse
import json
import statistics
import sys


def read_shapes(path):
    shapes = {}
    with open(path) as f:
        for line in f:
            fields = line.split("#", 1)[0].split()
            if len(fields) == 12:
                shapes[fields[0]] = fields
    return shapes


def real_macs(fields):
    """Multiply-adds of one gradient whose filter tap lands inside the input."""
    _, _, n, h, w, c, m, kh, kw, s, pad, dil = fields
    n, h, w, c, m, kh, kw, s, dil = map(int, (n, h, w, c, m, kh, kw, s, dil))
    span_h, span_w = (kh - 1) * dil + 1, (kw - 1) * dil + 1
    if pad == "SAME":
        oh, ow = -(-h // s), -(-w // s)
        top = max((oh - 1) * s + span_h - h, 0) // 2
        left = max((ow - 1) * s + span_w - w, 0) // 2
    else:
        oh, ow = (h - span_h) // s + 1, (w - span_w) // s + 1
        top = left = 0
    rows = sum(1 for y in range(oh) for i in range(kh) if 0 <= y * s + i * dil - top < h)
    cols = sum(1 for x in range(ow) for j in range(kw) if 0 <= x * s + j * dil - left < w)
    return n * rows * cols * c * m


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("json", help="records of convjit bench or run_suite.py")
    parser.add_argument("--shapes", default="../shared/bench/networks.txt")
    parser.add_argument("--share", type=float, default=85.0, help="the target, percent")
    args = parser.parse_args()
    shapes = read_shapes(args.shapes)
    with open(args.json) as f:
        records = json.load(f)["results"]
    groups = {}
    for r in records:
        fields = shapes.get(r["shape"])
        if r["impl"] != "convjit" or fields is None or fields[1] != "conv":
            continue
        if (fields[7], fields[8]) not in (("3", "3"), ("1", "1")):
            continue
        if int(fields[5]) < 64 or int(fields[6]) < 64 or not r.get("peak_percent"):
            continue
        peak = r["gflops"] / (r["peak_percent"] / 100)  # the measured peak, GFLOP/s
        rate = 2 * real_macs(fields) / (r["ms"] * 1e6)
        groups.setdefault((r["dtype"], r["threads"]), []).append(
            (100 * rate / peak, r["shape"], r["op"]))
    if not groups:
        sys.exit("no compute-bound convjit records in %s" % args.json)
    for (dtype, threads), cases in sorted(groups.items()):
        cases.sort()
        print("%s, %d threads: %d cases, median %.0f%% of the peak, %d at %.0f%% or more; "
              "lowest %s" % (dtype, threads, len(cases), statistics.median(p for p, *_ in cases),
                             sum(p >= args.share for p, *_ in cases), args.share,
                             ", ".join("%s %s %.0f%%" % (s, o, p) for p, s, o in cases[:3])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
