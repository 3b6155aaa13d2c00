#!/usr/bin/env python3
"""Markdown tables of convjit against its peers, from benchmark JSON files.

  benchmarks/markdown_tables.py networks.json [more.json ...] [--peak-gflops 285]

Takes the outputs of `benchmarks/run_suite.py` (or `convjit bench --format json` and
`benchmarks/tf_peer.py`), joins their records by case (shape, op, dtype, threads) and prints,
per dtype and thread count, one row per case: convjit's GFLOP/s, each peer's, and convjit over
the best peer on TensorFlow's layouts (what a TensorFlow user would otherwise get: TensorFlow's
kernels, oneDNN with its reorders counted) and over the best peer of all (oneDNN on its own
preferred layouts included); then, per op, the geometric means of both and the cases below 1.0.
Each ratio is convjit's rate over the peer's as the two were timed in turns in one process
(bench_records.speedup): TensorFlow's from tf_peer.py --convjit-lib where its records carry it. With
--peak-gflops (the host's measured FMA peak of one core, f32) it adds convjit's share of
threads x that peak. The tables go into docs/PERFORMANCE.md as they are printed.
"""

import argparse
import collections

from bench_records import best_speedup, geomean, load


def column(record):
    impl = record["impl"]
    if impl.startswith("convjit") or impl.startswith("tensorflow"):
        return impl
    return f"{impl} {record['layouts']}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", nargs="+")
    parser.add_argument("--peak-gflops", type=float, default=0.0,
                        help="the host's measured f32 FMA peak of one core, GFLOP/s")
    args = parser.parse_args()

    cases = collections.OrderedDict()  # (dtype, threads) -> {(shape, op): {column: record}}
    peers = collections.OrderedDict()  # (dtype, threads) -> ordered peer columns
    for r in load(args.json):
        group = (r["dtype"], r["threads"])
        case = cases.setdefault(group, collections.OrderedDict()).setdefault(
            (r["shape"], r["op"]), {})
        name = column(r)
        gflops = r.get("gflops")
        case[name] = r if isinstance(gflops, (int, float)) and gflops > 0 else None
        if name != "convjit":
            peers.setdefault(group, collections.OrderedDict())[name] = True

    for (dtype, threads), rows in cases.items():
        cols = list(peers.get((dtype, threads), {}))
        print(f"### {dtype}, {threads} thread{'s' if threads != 1 else ''}\n")
        tf_cols = [c for c in cols if not c.endswith(" best")]
        # Peers timed in turns with convjit in their own process: convjit's rate there beside
        # theirs (the ratio against them comes from those two).
        beside = [c for c in cols
                  if any(v.get(c) and v[c].get("convjit_gflops") for v in rows.values())]
        head = ["shape", "op", "convjit"] + cols + [f"convjit beside {c}" for c in beside] + [
            "/ best on TF layouts", "/ best of all"]
        if args.peak_gflops:
            head.insert(3, "% of peak")
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        by_op = collections.defaultdict(lambda: ([], []))

        def ratio_cell(ratio):
            if not ratio:
                return "n/a"
            return f"**{ratio:.2f}x**" if ratio < 1.0 else f"{ratio:.2f}x"

        for (shape, op), values in rows.items():
            ours = values["convjit"]["gflops"] if values.get("convjit") else None
            ratios = []
            for group_cols in (tf_cols, cols):
                rivals = [values[c] for c in group_cols if values.get(c)]
                ratios.append(best_speedup(ours, rivals) if ours else None)
            for kept, ratio in zip(by_op[op], ratios):
                if ratio:
                    kept.append(ratio)
            cells = [shape, op, f"{ours:.1f}" if ours else "n/a"]
            if args.peak_gflops:
                share = ours / (args.peak_gflops * threads) if ours else None
                cells.append(f"{100 * share:.0f}%" if share else "")
            cells += [f"{values[c]['gflops']:.1f}" if values.get(c) else "n/a" for c in cols]
            cells += [f"{values[c]['convjit_gflops']:.1f}"
                      if values.get(c) and values[c].get("convjit_gflops") else "n/a"
                      for c in beside]
            cells += [ratio_cell(r) for r in ratios]
            print("| " + " | ".join(cells) + " |")
        print()
        print("| op | against | cases | geometric mean | below 1.0x | lowest |")
        print("|---|---|---|---|---|---|")
        summary = list(by_op.items())
        summary.append(("all", tuple([r for kept in by_op.values() for r in kept[i]]
                                     for i in range(2))))
        for op, kept in summary:
            for against, ratios in zip(("best on TF layouts", "best of all"), kept):
                if not ratios:
                    continue
                print(f"| {op} | {against} | {len(ratios)} | {geomean(ratios):.2f}x | "
                      f"{sum(r < 1.0 for r in ratios)} | {min(ratios):.2f}x |")
        print()


if __name__ == "__main__":
    main()
