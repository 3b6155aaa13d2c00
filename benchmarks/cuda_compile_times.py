#!/usr/bin/env python3
"""NVRTC compile time and resources of the CUDA kernels of a shapes file (no GPU needed).

For every layer of the shapes file, each gradient (input and filter; depthwise layers their
depthwise ops) and each dtype, runs `convjit compile --target ARCH --json` (a cold compile:
the kernel cache is not used) and prints the kernel, NVRTC's time, registers per thread,
spill bytes and shared memory; then the median, 90th percentile and maximum compile time per
dtype. Exits 1 if any kernel spills or uses local memory. Progress goes to stderr.

  benchmarks/cuda_compile_times.py --convjit build/convjit \\
      --shapes ../shared/bench/gpu_networks.txt --target sm_90 --dtype bf16,f16,f32
"""
import argparse
import json
import statistics
import subprocess
import sys


def layers(path):
    with open(path) as f:
        for number, line in enumerate(f, 1):
            fields = line.split("#", 1)[0].split()
            if not fields:
                continue
            if len(fields) != 12:
                sys.exit(f"{path}:{number}: expected 12 columns, got {len(fields)}")
            name, kind = fields[0], fields[1]
            n, h, w, c, m, kh, kw, stride = (int(v) for v in fields[2:10])
            yield name, kind, n, h, w, c, m, kh, kw, stride, fields[10], int(fields[11])


def ops(kind):
    if kind == "dw":
        return ["DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter"]
    return ["Conv2DBackpropInput", "Conv2DBackpropFilter"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--convjit", required=True, help="the convjit executable")
    parser.add_argument("--shapes", required=True, help="a shapes file (shapes.txt columns)")
    parser.add_argument("--target", default="sm_90")
    parser.add_argument("--dtype", default="bf16", help="comma-separated: bf16,f16,f32,f64")
    parser.add_argument("--math", default="exact", choices=["exact", "tf32"])
    parser.add_argument("--only", default="", help="comma-separated layer names")
    args = parser.parse_args()
    dtypes = [d for d in args.dtype.split(",") if d]
    for d in dtypes:
        if d not in ("bf16", "f16", "f32", "f64"):
            parser.error(f"unknown dtype {d!r}")
    only = set(x for x in args.only.split(",") if x)
    rows = [l for l in layers(args.shapes) if not only or l[0] in only]
    missing = only - set(l[0] for l in rows)
    if missing:
        parser.error("unknown layer(s): " + ", ".join(sorted(missing)))
    jobs = [(l, op, d) for l in rows for op in ops(l[1]) for d in dtypes]
    times = {d: [] for d in dtypes}
    bad = []
    print(f"{'layer':<28} {'op':<36} {'dtype':<5} {'ms':>7} {'regs':>4} {'spill':>5} "
          f"{'smem':>6}  kernel")
    for index, ((name, kind, n, h, w, c, m, kh, kw, stride, pad, dil), op, d) in enumerate(jobs):
        print(f"[{index + 1}/{len(jobs)}] {name} {op} {d}", file=sys.stderr, flush=True)
        oc = c * m if kind == "dw" else m
        filt = f"{kh},{kw},{c},{m}" if kind == "dw" else f"{kh},{kw},{c},{oc}"
        cmd = [args.convjit, "compile", "--target", args.target, "--op", op,
               "--input-sizes", f"{n},{h},{w},{c}", "--filter-sizes", filt,
               "--strides", f"1,{stride},{stride},1", "--dilations", f"1,{dil},{dil},1",
               "--padding", pad, "--dtype", d, "--json"]
        if d == "f32" and args.math == "tf32":
            cmd += ["--math", "tf32"]
        result = subprocess.run(cmd, capture_output=True, text=True)
        if result.returncode != 0:
            bad.append(f"{name} {op} {d}: {result.stderr.strip() or result.stdout.strip()}")
            continue
        report = json.loads(result.stdout)
        kernels = report["kernels"]
        spill = sum(k["spill_load_bytes"] + k["spill_store_bytes"] + k["stack_bytes"]
                    for k in kernels)
        regs = max(k["registers"] for k in kernels)
        smem = max(k["shared_bytes"] for k in kernels)
        times[d].append(report["nvrtc_ms"])
        if spill:
            bad.append(f"{name} {op} {d}: {report['kernel']} spills or uses the stack")
        print(f"{name:<28} {op:<36} {d:<5} {report['nvrtc_ms']:7.1f} {regs:4d} {spill:5d} "
              f"{smem:6d}  {report['kernel']}")
    print()
    for d in dtypes:
        t = sorted(times[d])
        if not t:
            continue
        p90 = t[min(len(t) - 1, int(0.9 * len(t)))]
        print(f"{d}: {len(t)} compiles for {args.target}: NVRTC median {statistics.median(t):.1f} "
              f"ms, p90 {p90:.1f} ms, max {t[-1]:.1f} ms")
    for b in bad:
        print("FAIL " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
