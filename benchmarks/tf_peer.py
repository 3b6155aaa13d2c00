#!/usr/bin/env python3
"""TensorFlow's own CPU kernels as a benchmark peer of `convjit bench`.

Reads the same shapes file (name kind N H W IC M KH KW stride pad dilation), times
tf.raw_ops.Conv2DBackpropInput / Conv2DBackpropFilter and the depthwise
DepthwiseConv2dNativeBackpropInput / DepthwiseConv2dNativeBackpropFilter on NHWC tensors inside
a tf.function, with intra-op threads = the thread count and inter-op 1, and prints the
records `convjit bench --format json` (or csv) prints, so that the outputs of both can be
joined (plot_ratios.py does).

  benchmarks/tf_peer.py --shapes ../shared/bench/shapes.txt --dtype f32,bf16 --threads 1,2 \
      --format json > tf.json

TensorFlow fixes its thread pools when it starts, so each thread count runs in a process of its
own (this script calls itself). TF_ENABLE_ONEDNN_OPTS (TensorFlow's default 1 on x86 Linux: its
bundled oneDNN) is passed through; with 0 the records name the Eigen kernels
("tensorflow-<version>-eigen"). Cases TensorFlow's CPU kernels refuse (dilations above 1 in
the data and filter gradients, for one) get a record with the reason in "note".

With --convjit-lib PATH (libconvjit.so; run_suite.py passes the one beside the convjit it runs)
convjit's kernel for each case runs in this process too, through the C ABI on the same
tensors, its result checked against TensorFlow's, and the two are timed in turns, block by
block, as `convjit bench` times convjit and oneDNN. The TensorFlow record then carries
convjit's rate from these turns (`convjit_gflops`; a result that differs from TensorFlow's
makes the exit status 1), and the tables take the ratio against TensorFlow from the two rates
measured together rather than from two processes run at different times (on a host whose
speed changes for seconds at a time, those read up to 2x apart).
"""

import argparse
import ctypes
import csv
import json
import os
import statistics
import subprocess
import sys
import time

DTYPES = {
    "f16": "f16", "half": "f16", "float16": "f16",
    "bf16": "bf16", "bfloat16": "bf16",
    "f32": "f32", "float32": "f32", "float": "f32",
    "f64": "f64", "float64": "f64", "double": "f64",
}
FIELDS = ["shape", "op", "dtype", "threads", "impl", "layouts", "gflops", "ms", "flops",
          "setup_ms", "check", "max_rel_error", "kernel", "note", "convjit_gflops",
          "convjit_kernel"]


class UsageError(Exception):
    pass


def positive_int(text, what):
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{what}: '{text}' is not an integer")
    if value < 1:
        raise UsageError(f"{what}: {value} is not positive")
    return value


def load_shapes(path):
    """The shapes file, as convjit bench reads it (the same checks, the same messages)."""
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        raise UsageError(f"cannot open benchmark shapes file '{path}': {e.strerror}")
    shapes, names = [], set()
    for number, line in enumerate(lines, 1):
        fields = line.split()
        if not fields or fields[0].startswith("#"):
            continue
        at = f"{path}:{number}"
        if len(fields) != 12:
            raise UsageError(f"{at}: expected 12 fields, found {len(fields)}")
        name, kind, *numbers = fields[:10]
        pad, dilation = fields[10], fields[11]
        if kind not in ("conv", "dw"):
            raise UsageError(f"{at}: kind '{kind}' is not conv or dw")
        if pad not in ("SAME", "VALID"):
            raise UsageError(f"{at}: pad '{pad}' is not SAME or VALID")
        n, h, w, ic, m, kh, kw, stride = (positive_int(v, at) for v in numbers)
        shape = dict(name=name, depthwise=kind == "dw", n=n, h=h, w=w, ic=ic, m=m, kh=kh, kw=kw,
                     stride=stride, same=pad == "SAME", dilation=positive_int(dilation, at))
        if name in names:
            raise UsageError(f"{at}: shape name '{name}' appears twice")
        names.add(name)
        shapes.append(shape)
    return shapes


def out_size(size, k, stride, dilation, same):
    k_eff = (k - 1) * dilation + 1
    return (size + stride - 1) // stride if same else (size - k_eff + stride) // stride


def flops(s):
    oh = out_size(s["h"], s["kh"], s["stride"], s["dilation"], s["same"])
    ow = out_size(s["w"], s["kw"], s["stride"], s["dilation"], s["same"])
    per_pixel = s["ic"] * s["m"] * s["kh"] * s["kw"]
    return 2.0 * s["n"] * oh * ow * per_pixel


def ops_for(s):
    return ["dw_bwd_data", "dw_bwd_filter"] if s["depthwise"] else ["bwd_data", "bwd_filter"]


def check_common_args(args):
    """The flags every peer script shares, checked and resolved in place: --dtype into
    args.dtypes, --min-time-ms into a number, --shapes and --only into args.shapes_list.
    Raises UsageError."""
    args.dtypes = []
    for name in args.dtype.split(","):
        if name not in DTYPES:
            raise UsageError(f"--dtype: '{name}' is not a dtype (f32, bf16, f16 or f64)")
        if DTYPES[name] not in args.dtypes:
            args.dtypes.append(DTYPES[name])
    try:
        args.min_time_ms = float(args.min_time_ms)
    except ValueError:
        raise UsageError(f"--min-time-ms: '{args.min_time_ms}' is not a number")
    if not args.min_time_ms > 0:
        raise UsageError(f"--min-time-ms: {args.min_time_ms} is not a positive time")
    shapes = load_shapes(args.shapes)
    only = [n for n in args.only.split(",") if n] if args.only else []
    unknown = [n for n in only if n not in {s["name"] for s in shapes}]
    if unknown:
        raise UsageError(f"--only: no shape named {', '.join(unknown)} in the file (it has: "
                         f"{', '.join(s['name'] for s in shapes)})")
    args.shapes_list = [s for s in shapes if not only or s["name"] in only]
    if not args.shapes_list:
        raise UsageError(f"{args.shapes} lists no shapes")


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", required=True, help="the shapes file")
    parser.add_argument("--only", default="", help="shape names to run, comma separated")
    parser.add_argument("--dtype", "--dtypes", default="f32,bf16", help="f32, bf16, f16, f64")
    parser.add_argument("--threads", default="1,2", help="thread counts, e.g. 1,2")
    parser.add_argument("--format", default="json", choices=["json", "csv"])
    parser.add_argument("--min-time-ms", default="200", help="time each case at least this long")
    parser.add_argument("--convjit-lib", default="",
                        help="libconvjit.so: time convjit's kernel in this process too, in turns "
                        "with TensorFlow's")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        check_common_args(args)
        args.thread_counts = [positive_int(t, "--threads") for t in args.threads.split(",")]
        if args.convjit_lib and not os.path.isfile(args.convjit_lib):
            raise UsageError(f"--convjit-lib: no file '{args.convjit_lib}'")
    except UsageError as e:
        parser.error(str(e))
    return args


CONVJIT_MAX_RANK = 8  # convjit.h's CONVJIT_MAX_RANK


class ConvjitLib:
    """convjit's C ABI (include/convjit/convjit.h) through ctypes: compile one op, run it."""

    DTYPES = {"f16": 0, "bf16": 1, "f32": 2, "f64": 3}
    OPS = {"bwd_data": "Conv2DBackpropInput", "bwd_filter": "Conv2DBackpropFilter",
           "dw_bwd_data": "DepthwiseConv2dNativeBackpropInput",
           "dw_bwd_filter": "DepthwiseConv2dNativeBackpropFilter"}

    class Tensor(ctypes.Structure):
        _fields_ = [("dtype", ctypes.c_int), ("rank", ctypes.c_int32),
                    ("shape", ctypes.c_int64 * CONVJIT_MAX_RANK), ("data", ctypes.c_void_p)]

    class OpDesc(ctypes.Structure):
        _fields_ = [("op", ctypes.c_char_p), ("dtype", ctypes.c_int),
                    ("data_format", ctypes.c_char_p), ("padding", ctypes.c_char_p),
                    ("input", ctypes.POINTER(ctypes.c_int64)), ("input_len", ctypes.c_int32),
                    ("filter", ctypes.POINTER(ctypes.c_int64)), ("filter_len", ctypes.c_int32),
                    ("out_backprop", ctypes.POINTER(ctypes.c_int64)),
                    ("out_backprop_len", ctypes.c_int32),
                    ("strides", ctypes.POINTER(ctypes.c_int64)), ("strides_len", ctypes.c_int32),
                    ("dilations", ctypes.POINTER(ctypes.c_int64)),
                    ("dilations_len", ctypes.c_int32),
                    ("explicit_paddings", ctypes.POINTER(ctypes.c_int64)),
                    ("explicit_paddings_len", ctypes.c_int32)]

    class CompileOptions(ctypes.Structure):
        _fields_ = [("device", ctypes.c_char_p), ("backend", ctypes.c_char_p),
                    ("num_threads", ctypes.c_int32), ("math_mode", ctypes.c_int32),
                    ("nondeterministic", ctypes.c_int32), ("always_compile", ctypes.c_int32)]

    def __init__(self, path):
        lib = ctypes.CDLL(path)
        lib.convjit_compile_with_options.restype = ctypes.c_int
        lib.convjit_compile_with_options.argtypes = [
            ctypes.POINTER(self.OpDesc), ctypes.POINTER(self.CompileOptions),
            ctypes.POINTER(ctypes.c_void_p)]
        lib.convjit_run.restype = ctypes.c_int
        lib.convjit_run.argtypes = [ctypes.c_void_p] + [ctypes.POINTER(self.Tensor)] * 3
        lib.convjit_destroy.argtypes = [ctypes.c_void_p]
        lib.convjit_last_error.restype = ctypes.c_char_p
        lib.convjit_kernel_name.restype = ctypes.c_char_p
        lib.convjit_kernel_name.argtypes = [ctypes.c_void_p]
        self.lib = lib

    def _check(self, status, what):
        if status != 0:
            raise RuntimeError(f"convjit {what}: {self.lib.convjit_last_error().decode()}")

    @staticmethod
    def _ints(values):
        return (ctypes.c_int64 * len(values))(*values), len(values)

    def compile(self, s, op, dtype_name, threads, x_shape, w_shape, dy_shape):
        """A kernel handle for the case and its name; the caller destroys the handle."""
        keep = {}  # the arrays the descriptor points to live until compile returns
        desc = self.OpDesc()
        desc.op = self.OPS[op].encode()
        desc.dtype = self.DTYPES[dtype_name]
        desc.data_format = b"NHWC"
        desc.padding = b"SAME" if s["same"] else b"VALID"
        for field, values in (("input", x_shape), ("filter", w_shape), ("out_backprop", dy_shape),
                              ("strides", [1, s["stride"], s["stride"], 1]),
                              ("dilations", [1, s["dilation"], s["dilation"], 1])):
            keep[field], length = self._ints(values)
            setattr(desc, field, ctypes.cast(keep[field], ctypes.POINTER(ctypes.c_int64)))
            setattr(desc, field + "_len", length)
        options = self.CompileOptions()
        options.num_threads = threads
        kernel = ctypes.c_void_p()
        self._check(self.lib.convjit_compile_with_options(ctypes.byref(desc), ctypes.byref(options),
                                                          ctypes.byref(kernel)), "compile")
        return kernel, self.lib.convjit_kernel_name(kernel).decode()

    def tensor(self, array, dtype_name):
        t = self.Tensor()
        t.dtype = self.DTYPES[dtype_name]
        t.rank = array.ndim
        for i, extent in enumerate(array.shape):
            t.shape[i] = extent
        t.data = array.ctypes.data
        return t

    def run(self, kernel, a, b, out):
        self._check(self.lib.convjit_run(kernel, ctypes.byref(a), ctypes.byref(b),
                                         ctypes.byref(out)), "run")


# Turns of the in-process comparison: each implementation runs untimed for WARM_MS (the other's
# threads have gone quiet by then, its own are awake), then is timed for at least BLOCK_MS.
WARM_MS, BLOCK_MS = 20.0, 25.0


def timed_block(fn, warm_ms, block_ms, times):
    """Runs fn untimed for warm_ms, then timed for block_ms; appends each call's milliseconds."""
    end = time.perf_counter() + warm_ms / 1e3
    while time.perf_counter() < end:
        fn()
    end = time.perf_counter() + block_ms / 1e3
    count = 0
    while count < 2 or time.perf_counter() < end:
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
        count += 1


def aligned_copy(array, alignment=64):
    """A C-contiguous copy of `array` whose data start on a cache line, as TensorFlow's tensors
    and `convjit bench`'s buffers do (numpy's large arrays start 16 bytes past one, and a
    vector load across two lines costs twice one within a line)."""
    import numpy as np
    raw = np.empty(array.nbytes + alignment, dtype=np.uint8)
    start = -raw.ctypes.data % alignment
    out = raw[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


def time_case(tf, s, op, dtype_name, min_time_ms, convjit=None, threads=1):
    """Median milliseconds of one TensorFlow call and its tf.function's first call (trace +
    run); with `convjit` (a ConvjitLib) also convjit's median, its kernel's name and the largest
    difference from TensorFlow's result relative to its largest magnitude, timed in turns."""
    import numpy as np
    dtype = {"f16": tf.float16, "bf16": tf.bfloat16, "f32": tf.float32, "f64": tf.float64}[dtype_name]
    rng = np.random.default_rng(2024)

    def tensor(shape):
        values = rng.integers(-128, 129, size=shape).astype(np.float32) / 128.0
        return tf.cast(tf.constant(values), dtype)

    oh = out_size(s["h"], s["kh"], s["stride"], s["dilation"], s["same"])
    ow = out_size(s["w"], s["kw"], s["stride"], s["dilation"], s["same"])
    oc = s["ic"] * s["m"] if s["depthwise"] else s["m"]
    x_shape = [s["n"], s["h"], s["w"], s["ic"]]
    w_shape = [s["kh"], s["kw"], s["ic"], s["m"]]
    dy_shape = [s["n"], oh, ow, oc]
    dy = tensor(dy_shape)
    attrs = dict(strides=[1, s["stride"], s["stride"], 1], padding="SAME" if s["same"] else "VALID",
                 dilations=[1, s["dilation"], s["dilation"], 1])
    if op == "bwd_data":
        w = tensor(w_shape)
        operand = w
        sizes = tf.constant(x_shape, tf.int32)
        fn = tf.function(lambda: tf.raw_ops.Conv2DBackpropInput(
            input_sizes=sizes, filter=w, out_backprop=dy, **attrs))
    elif op == "bwd_filter":
        x = tensor(x_shape)
        operand = x
        sizes = tf.constant(w_shape, tf.int32)
        fn = tf.function(lambda: tf.raw_ops.Conv2DBackpropFilter(
            input=x, filter_sizes=sizes, out_backprop=dy, **attrs))
    elif op == "dw_bwd_data":
        w = tensor(w_shape)
        operand = w
        sizes = tf.constant(x_shape, tf.int32)
        fn = tf.function(lambda: tf.raw_ops.DepthwiseConv2dNativeBackpropInput(
            input_sizes=sizes, filter=w, out_backprop=dy, **attrs))
    else:
        x = tensor(x_shape)
        operand = x
        sizes = tf.constant(w_shape, tf.int32)
        fn = tf.function(lambda: tf.raw_ops.DepthwiseConv2dNativeBackpropFilter(
            input=x, filter_sizes=sizes, out_backprop=dy, **attrs))
    start = time.perf_counter()
    want = fn().numpy()  # traces, runs, and surfaces the kernel's errors
    setup_ms = (time.perf_counter() - start) * 1e3
    if convjit is None:
        times = []
        budget_end = time.perf_counter() + min_time_ms / 1e3
        while len(times) < 6 or (time.perf_counter() < budget_end and len(times) < 200):
            start = time.perf_counter()
            fn()
            times.append((time.perf_counter() - start) * 1e3)
        return statistics.median(times), setup_ms, None

    # convjit on the same values: the op's operands in TensorFlow's argument order (the filter
    # or the input first, then dy), into an output of TensorFlow's result's shape and dtype.
    kernel, kernel_name = convjit.compile(s, op, dtype_name, threads, x_shape, w_shape, dy_shape)
    try:
        a_array, b_array = aligned_copy(operand.numpy()), aligned_copy(dy.numpy())
        out_array = aligned_copy(np.empty_like(want))
        a, b, out = (convjit.tensor(v, dtype_name) for v in (a_array, b_array, out_array))
        run_convjit = lambda: convjit.run(kernel, a, b, out)  # noqa: E731
        run_convjit()
        got, ref = out_array.astype(np.float64), want.astype(np.float64)
        scale = max(float(np.max(np.abs(ref))), 1e-30) if ref.size else 1.0
        max_rel_error = float(np.max(np.abs(got - ref))) / scale if ref.size else 0.0
        tf_times, convjit_times = [], []
        budget_end = time.perf_counter() + 2 * min_time_ms / 1e3
        while (len(tf_times) < 6 or len(convjit_times) < 6 or
               time.perf_counter() < budget_end) and len(tf_times) < 400:
            timed_block(fn, WARM_MS, BLOCK_MS, tf_times)
            timed_block(run_convjit, WARM_MS, BLOCK_MS, convjit_times)
    finally:
        convjit.lib.convjit_destroy(kernel)
    return statistics.median(tf_times), setup_ms, dict(
        ms=statistics.median(convjit_times), kernel=kernel_name, max_rel_error=max_rel_error)


def worker(args, threads):
    """One thread count: TensorFlow configured before its first op."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    eigen = os.environ.get("TF_ENABLE_ONEDNN_OPTS", "1") == "0"
    impl = f"tensorflow-{tf.__version__}" + ("-eigen" if eigen else "")
    convjit = ConvjitLib(args.convjit_lib) if args.convjit_lib else None
    records = []
    cases = [(s, op, dt) for dt in args.dtypes for s in args.shapes_list for op in ops_for(s)]
    for i, (s, op, dt) in enumerate(cases, 1):
        print(f"[{i}/{len(cases)}] {s['name']} {op} {dt} {threads}T...", file=sys.stderr, flush=True)
        record = dict(shape=s["name"], op=op, dtype=dt, threads=threads, impl=impl, layouts="tf",
                      gflops=0.0, ms=0.0, flops=flops(s), setup_ms=0.0, check="",
                      max_rel_error=0.0, kernel="", note="")
        try:
            ms, setup_ms, same_process = time_case(tf, s, op, dt, args.min_time_ms, convjit,
                                                   threads)
            record.update(ms=ms, setup_ms=setup_ms, gflops=record["flops"] * 1e-9 / (ms * 1e-3))
            if same_process:
                # Both sides sum the same products (small multiples of 1/128) in their own
                # orders: equal up to the output dtype's rounding and f32 accumulation.
                error = same_process["max_rel_error"]
                tolerance = 1e-2 if dt in ("bf16", "f16") else 1e-5
                record.update(convjit_gflops=record["flops"] * 1e-9 / (same_process["ms"] * 1e-3),
                              convjit_kernel=same_process["kernel"], max_rel_error=error,
                              check=("ok" if error <= tolerance else "MISMATCH") +
                              " (convjit vs tensorflow)")
        except Exception as e:  # TensorFlow refuses the case on this CPU: say why
            record["note"] = " ".join(str(e).split())[:300] or type(e).__name__
        records.append(record)
    return records


def main(argv):
    args = parse_args(argv)
    if args.worker:
        json.dump(worker(args, args.thread_counts[0]), sys.stdout)
        return 0
    records = []
    for threads in args.thread_counts:
        command = [sys.executable, os.path.abspath(__file__), *argv, "--worker",
                   "--threads", str(threads)]
        # The last --threads wins in argparse: the worker sees only its own count.
        done = subprocess.run(command, stdout=subprocess.PIPE, check=False)
        if done.returncode != 0:
            print(f"tf_peer.py: the {threads}-thread run failed (exit {done.returncode})",
                  file=sys.stderr)
            return 1
        records.extend(json.loads(done.stdout))
    if args.format == "csv":
        writer = csv.DictWriter(sys.stdout, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)
    else:
        json.dump({"tool": "tf_peer.py", "command": " ".join(["tf_peer.py", *argv]),
                   "host": os.uname().machine, "results": records}, sys.stdout, indent=1)
        print()
    mismatched = [r for r in records if r["check"].startswith("MISMATCH")]
    for r in mismatched:
        print(f"tf_peer.py: convjit's result differs from TensorFlow's: {r['shape']} {r['op']} "
              f"{r['dtype']} {r['threads']}T, max relative error {r['max_rel_error']:.3g}",
              file=sys.stderr)
    return 1 if mismatched else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
