#!/usr/bin/env python3
"""Plots convjit's speed against its peers, per layer, from benchmark JSON files.

  benchmarks/plot_ratios.py convjit.json tf.json -o ratios.png [--title "Zen 4, 2 threads"]

Takes any number of `convjit bench --format json` and `benchmarks/tf_peer.py` outputs, joins
their records by case (shape, op, dtype, threads) and draws, for each dtype and thread count,
the ratio convjit / peer per case (log scale, 1.0 marked): one bar per peer column (oneDNN
releases on TensorFlow's and on their own layouts, TensorFlow) and a marker for the best peer.
Prints the geometric means it drew. Needs matplotlib.
"""

import argparse
import collections
import sys

from bench_records import best_speedup, geomean, load, speedup


def column(record):
    impl = record["impl"]
    return impl if impl.startswith("convjit") or impl.startswith("tensorflow") \
        else f"{impl}/{record['layouts']}"


def ratios_by_group(records):
    """{(dtype, threads): (cases, {column: [ratio or None per case]}, [best ratio per case])}."""
    cases = collections.OrderedDict()
    for r in records:
        key = (r["dtype"], r["threads"], r["shape"], r["op"])
        cases.setdefault(key, {})
        if r.get("note") or not r.get("gflops"):
            continue  # did not run this case
        cases[key][column(r)] = r
    groups = collections.OrderedDict()
    for (dtype, threads, shape, op), by_column in cases.items():
        if "convjit" not in by_column:
            continue
        mine = by_column["convjit"]["gflops"]
        group = groups.setdefault((dtype, threads), ([], collections.OrderedDict(), []))
        labels, per_column, best = group
        labels.append(f"{shape} {op}")
        peers = {c: r for c, r in by_column.items() if c != "convjit"}
        for c in peers:
            per_column.setdefault(c, [None] * (len(labels) - 1))
        for c, values in per_column.items():
            values.append(speedup(mine, peers[c]) if c in peers else None)
        best.append(best_speedup(mine, peers.values()))
    return groups


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+", help="JSON outputs of convjit bench and tf_peer.py")
    parser.add_argument("-o", "--output", required=True, help="the PNG to write")
    parser.add_argument("--title", default="", help="a line above the plots (host, threads)")
    args = parser.parse_args(argv)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = ratios_by_group(load(args.inputs))
    if not groups:
        print("plot_ratios.py: no case has both convjit and a peer", file=sys.stderr)
        return 1
    height = sum(max(2.5, 0.28 * len(labels)) for labels, _, _ in groups.values())
    fig, axes = plt.subplots(len(groups), 1, figsize=(14, height + 1.0), squeeze=False)
    for ax, ((dtype, threads), (labels, per_column, best)) in zip(axes[:, 0], groups.items()):
        rows = range(len(labels))
        width = 0.8 / max(1, len(per_column))
        for i, (name, values) in enumerate(per_column.items()):
            ys = [row + (i - (len(per_column) - 1) / 2) * width for row in rows]
            ax.barh([y for y, v in zip(ys, values) if v], [v for v in values if v],
                    height=width, label=f"vs {name} (geomean {geomean([v for v in values if v]):.2f}x)")
        ax.scatter([b for b in best if b], [row for row, b in zip(rows, best) if b], marker="|",
                   s=200, color="black", zorder=3,
                   label=f"vs best peer (geomean {geomean([b for b in best if b]):.2f}x)")
        ax.axvline(1.0, color="red", linewidth=1)
        ax.set_xscale("log")
        ax.set_yticks(list(rows))
        ax.set_yticklabels(labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("convjit / peer (GFLOP/s ratio; right of the red line: convjit faster)")
        ax.set_title(f"{dtype}, {threads} thread{'s' if threads != 1 else ''}")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        below = sum(1 for b in best if b and b < 1.0)
        print(f"{dtype} {threads}T: {len(labels)} cases, geomean vs best peer "
              f"{geomean([b for b in best if b]):.3f}x, {below} below 1.0x")
    if args.title:
        fig.suptitle(args.title)
    # tight_layout ignores the suptitle: leave it a strip of about half an inch at the top.
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / fig.get_figheight()) if args.title else None)
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
