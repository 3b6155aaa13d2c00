#!/usr/bin/env python3
"""Runs `convjit bench` and tf_peer.py shape by shape, alternating, and merges their records.

TensorFlow cannot run inside the benchmark's process, so the two alternate at the grain of a
shape instead: for each shape of the file, `convjit bench --only SHAPE` (convjit and the
oneDNN peers, alternating call by call) and then tf_peer.py --only SHAPE, so that drift in
clocks or load over a long run hits both alike. Writes one JSON file with every record, which
plot_ratios.py reads.

The TensorFlow process also runs convjit's kernels, through libconvjit.so (the one beside
the convjit executable, or --convjit-lib), in turns with TensorFlow's (tf_peer.py
--convjit-lib): the ratio against TensorFlow comes from those two rates, measured together.

On a host whose speed changes for seconds at a time (a shared virtual machine), one pass can
time convjit in a slow spell and TensorFlow in a fast one, or the reverse: the same shape's
TensorFlow rate moved 1.6x between passes a minute apart. `--rounds N` runs the pair N times
per shape, alternating, and keeps each implementation's fastest round (its median over the
round's runs), so that every implementation is read at the host's best; each record then
lists all its rounds' rates in `gflops_rounds`.

  /tmp/peers/bin/python benchmarks/run_suite.py --convjit build/convjit \
      --shapes ../shared/bench/networks.txt --dtype f32,bf16 --threads 1,2 -o networks.json

Progress (both programs') goes to stderr. The exit status is 1 when a convjit result did not
match its check, or a run failed.
"""

import argparse
import json
import os
import subprocess
import sys


def shape_names(path):
    names = []
    for line in open(path):
        fields = line.split()
        if fields and not fields[0].startswith("#"):
            names.append(fields[0])
    return names


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more: {text}")
    return value


def case_key(record):
    return tuple(record.get(k) for k in ("shape", "op", "dtype", "threads", "impl", "layouts"))


def fastest_rounds(rounds):
    """Each case's record from the round with the highest rate, all rounds' rates beside it."""
    best, rates = {}, {}
    for records in rounds:
        for r in records:
            key = case_key(r)
            rates.setdefault(key, []).append(r.get("gflops", 0.0))
            if key not in best or r.get("gflops", 0.0) > best[key].get("gflops", 0.0):
                best[key] = r
    merged = []
    for key, r in best.items():
        if len(rounds) > 1:
            r = dict(r, gflops_rounds=rates[key])
        merged.append(r)
    return merged


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--convjit", required=True, help="the convjit executable")
    parser.add_argument("--shapes", required=True, help="the shapes file")
    parser.add_argument("--only", default="", help="shape names to run, comma separated")
    parser.add_argument("--dtype", default="f32,bf16")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--min-time-ms", default="200")
    parser.add_argument("--no-tensorflow", action="store_true", help="run convjit bench only")
    parser.add_argument("--convjit-lib", default="",
                        help="libconvjit.so for the TensorFlow process (default: the one beside "
                        "--convjit; none there: TensorFlow is compared across processes)")
    parser.add_argument("--rounds", type=positive_int, default=1,
                        help="passes over each shape, alternating; each implementation's "
                        "fastest is kept (default 1)")
    parser.add_argument("-o", "--output", required=True, help="the merged JSON file")
    args = parser.parse_args(argv)

    names = [n for n in args.only.split(",") if n] or shape_names(args.shapes)
    convjit_lib = args.convjit_lib or os.path.join(
        os.path.dirname(os.path.abspath(args.convjit)), "libconvjit.so")
    if args.no_tensorflow:
        convjit_lib = ""
    elif not os.path.isfile(convjit_lib):
        if args.convjit_lib:
            print(f"run_suite.py: no file '{convjit_lib}'", file=sys.stderr)
            return 2
        print(f"run_suite.py: no {convjit_lib}: the ratios against TensorFlow compare rates "
              "from two processes run at different times", file=sys.stderr)
        convjit_lib = ""
    tf_peer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tf_peer.py")
    common = ["--shapes", args.shapes, "--dtype", args.dtype, "--threads", args.threads,
              "--min-time-ms", args.min_time_ms]
    records, status = [], 0
    for i, name in enumerate(names, 1):
        print(f"== [{i}/{len(names)}] {name}", file=sys.stderr, flush=True)
        runs = [[args.convjit, "bench", *common, "--only", name, "--format", "json"]]
        if not args.no_tensorflow:
            runs.append([sys.executable, tf_peer, *common, "--only", name, "--format", "json"]
                        + (["--convjit-lib", convjit_lib] if convjit_lib else []))
        rounds = []
        for round_index in range(args.rounds):
            if args.rounds > 1:
                print(f"   round {round_index + 1}/{args.rounds}", file=sys.stderr, flush=True)
            this_round = []
            for command in runs:
                done = subprocess.run(command, stdout=subprocess.PIPE, check=False)
                if done.returncode == 2:
                    print(f"run_suite.py: usage error from {' '.join(command)}", file=sys.stderr)
                    return 2
                if done.returncode != 0:
                    status = 1
                try:
                    this_round.extend(json.loads(done.stdout)["results"])
                except (ValueError, KeyError):
                    print(f"run_suite.py: no results from {' '.join(command)}", file=sys.stderr)
                    status = 1
            rounds.append(this_round)
        records.extend(fastest_rounds(rounds))
    with open(args.output, "w") as f:
        json.dump({"tool": "run_suite.py", "command": " ".join(["run_suite.py", *argv]),
                   "results": records}, f, indent=1)
        f.write("\n")
    print(f"wrote {len(records)} records to {args.output}", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
