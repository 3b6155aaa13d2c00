#!/usr/bin/env python3
"""cuDNN through PyTorch as a peer of `convjit bench --device cuda`: the number a PyTorch user sees.

Reads the same shapes file and times torch.nn.grad.conv2d_input / conv2d_weight (depthwise:
groups = channels) on channels-last (NHWC) CUDA tensors with torch.backends.cudnn.benchmark on,
timed with CUDA events after a warm-up, and prints the records `convjit bench --format json`
(or csv) prints, so that both outputs can be joined (plot_ratios.py does).

  benchmarks/torch_gpu_peer.py --shapes ../shared/bench/gpu_networks.txt --dtype bf16,f16,f32 \
      [--device cuda:0] [--math exact|tf32] --format json > torch.json

TensorFlow's SAME padding puts an odd extra row/column at the bottom/right, which PyTorch's
symmetric `padding` cannot say: as in `convjit bench`, such layers run on an input one row/column
larger (the data gradient's extra row is dropped, the filter gradient's input gets a zero row),
prepared outside the timing. Without PyTorch or a CUDA device it stops with the reason (exit 1).
"""

import argparse
import csv
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tf_peer import FIELDS, UsageError, check_common_args, flops, out_size  # noqa: E402


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", required=True, help="the shapes file")
    parser.add_argument("--only", default="", help="shape names to run, comma separated")
    parser.add_argument("--dtype", "--dtypes", default="bf16,f16,f32", help="bf16, f16, f32, f64")
    parser.add_argument("--device", default="cuda:0", help="cuda or cuda:N")
    parser.add_argument("--math", default="exact", choices=["exact", "tf32"],
                        help="f32 as exact FFMA or TF32 tensor cores")
    parser.add_argument("--format", default="json", choices=["json", "csv"])
    parser.add_argument("--min-time-ms", default="200", help="time each case at least this long")
    args = parser.parse_args(argv)
    try:
        if args.device != "cuda" and not (args.device.startswith("cuda:")
                                          and args.device[5:].isdigit()):
            raise UsageError(f"--device: '{args.device}' is not cuda or cuda:N")
        check_common_args(args)
    except UsageError as e:
        parser.error(str(e))
    return args


def pads(size, k, stride, dilation, same):
    """TensorFlow's (before, after) padding of one dimension."""
    out = out_size(size, k, stride, dilation, same)
    if not same:
        return 0, 0
    total = max((out - 1) * stride + (k - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


def time_case(torch, s, op, dtype_name, device, min_time_ms):
    """Median milliseconds of one call (CUDA events) and the first call's milliseconds."""
    dtype = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32,
             "f64": torch.float64}[dtype_name]
    gen = torch.Generator(device="cpu").manual_seed(2024)

    def tensor(*shape):  # multiples of 2^-7 in [-1, 1], as convjit bench fills them
        values = torch.randint(-128, 129, shape, generator=gen).float() / 128.0
        return values.to(device=device, dtype=dtype)

    (pt, pb), (pl, pr) = (pads(s["h"], s["kh"], s["stride"], s["dilation"], s["same"]),
                          pads(s["w"], s["kw"], s["stride"], s["dilation"], s["same"]))
    h, w = s["h"] + (pb - pt), s["w"] + (pr - pl)  # the odd extra row/column, see above
    oh = out_size(s["h"], s["kh"], s["stride"], s["dilation"], s["same"])
    ow = out_size(s["w"], s["kw"], s["stride"], s["dilation"], s["same"])
    groups = s["ic"] if s["depthwise"] else 1
    oc = s["ic"] * s["m"] if s["depthwise"] else s["m"]
    cl = torch.channels_last
    dy = tensor(s["n"], oc, oh, ow).contiguous(memory_format=cl)
    kwargs = dict(stride=s["stride"], padding=(pt, pl), dilation=s["dilation"], groups=groups)
    if op.endswith("bwd_data"):
        weight = tensor(oc, s["ic"] // groups, s["kh"], s["kw"]).contiguous(memory_format=cl)
        size = (s["n"], s["ic"], h, w)
        fn = lambda: torch.nn.grad.conv2d_input(size, weight, dy, **kwargs)  # noqa: E731
    else:
        x = torch.zeros(s["n"], s["ic"], h, w, device=device, dtype=dtype)
        x[:, :, :s["h"], :s["w"]] = tensor(s["n"], s["ic"], s["h"], s["w"])
        x = x.contiguous(memory_format=cl)
        size = (oc, s["ic"] // groups, s["kh"], s["kw"])
        fn = lambda: torch.nn.grad.conv2d_weight(x, size, dy, **kwargs)  # noqa: E731
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()  # cudnn.benchmark searches here
    stop.record()
    stop.synchronize()
    setup_ms = start.elapsed_time(stop)
    for _ in range(3):
        fn()
    start.record()
    fn()
    stop.record()
    stop.synchronize()
    per_call = max(start.elapsed_time(stop), 1e-4)
    calls = max(1, min(1000, int(min_time_ms / 10 / per_call)))
    times = []
    for _ in range(10):
        start.record()
        for _ in range(calls):
            fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / calls)
    return statistics.median(times), setup_ms


def main(argv):
    args = parse_args(argv)
    try:
        import torch
    except ImportError as e:
        print(f"torch_gpu_peer.py: PyTorch is not installed ({e})", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("torch_gpu_peer.py: no CUDA device: torch.cuda.is_available() is False",
              file=sys.stderr)
        return 1
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = args.math == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = args.math == "tf32"
    device = torch.device(args.device)
    impl = f"pytorch-{torch.__version__.split('+')[0]}-cudnn-{torch.backends.cudnn.version()}"
    # Both gradients of every shape, in the file's order, as `convjit bench --device cuda` runs.
    cases = [(s, prefix + op, dt) for dt in args.dtypes for s in args.shapes_list
             for prefix in ["dw_" if s["depthwise"] else ""] for op in ("bwd_data", "bwd_filter")]
    records = []
    for i, (s, op, dt) in enumerate(cases, 1):
        print(f"[{i}/{len(cases)}] {s['name']} {op} {dt}...", file=sys.stderr, flush=True)
        name = dt + ("-tf32" if dt == "f32" and args.math == "tf32" else "")
        record = dict(shape=s["name"], op=op, dtype=name, threads=0, impl=impl, layouts="best",
                      gflops=0.0, ms=0.0, flops=flops(s), setup_ms=0.0, check="",
                      max_rel_error=0.0, kernel="torch.nn.grad", note="")
        try:
            ms, setup_ms = time_case(torch, s, op, dt, device, args.min_time_ms)
            record.update(ms=ms, setup_ms=setup_ms, gflops=record["flops"] * 1e-9 / (ms * 1e-3))
        except Exception as e:  # PyTorch refuses the case: say why
            record["note"] = " ".join(str(e).split())[:300] or type(e).__name__
        records.append(record)
    if args.format == "csv":
        writer = csv.DictWriter(sys.stdout, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)
    else:
        json.dump({"tool": "torch_gpu_peer.py",
                   "command": " ".join(["torch_gpu_peer.py", *argv]),
                   "host": torch.cuda.get_device_name(device), "results": records},
                  sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
