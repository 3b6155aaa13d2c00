"""convjit's framework adapters against each framework's own convolutions:

1. per-call overhead: one Conv2D on tiny tensors (1x4x4x4, 1x1 filter), framework -> convjit ->
   framework, with the kernel already compiled (median of many calls);
2. one training step (forward, backward, SGD update) of a small ResNet basic block
   (two 3x3 convolutions of 64 channels with ReLU and the skip connection) on a batch of
   8x56x56x64, with convjit's layers and with the framework's own, the two timed in turns
   (PyTorch: NCHW tensors, then channels_last modules and batch).

    python benchmarks/frameworks.py [--frameworks torch,jax,tf] [--steps 10] [--quick]
                                    [--steady-malloc]

Prints one table per framework, with the minor page faults per training step of each side:
a step frees and allocates activation-sized tensors, and glibc's malloc returns freed memory
at the top of its heap to the system whenever the free space there passes its (moving) trim
threshold, so the next tensor placed there is faulted in page by page (~1 ms per 6 MB). Which
side that hits depends on the heap's layout, not on the convolutions. --steady-malloc re-runs
the benchmark with glibc's trim and mmap thresholds fixed high (GLIBC_TUNABLES), which keeps
freed memory mapped as jemalloc or tcmalloc would, and times the steps without that noise.
Figures mean something only on a quiet machine; record them in docs/PERFORMANCE.md with the
machine's description. --quick runs tiny sizes (a smoke test).
"""

import argparse
import os
import resource
import statistics
import sys
import time

STEADY_MALLOC = "glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967296"


def median_seconds(fn, repeats, warmup=3):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def alternating_medians(ours, theirs, repeats, warmup=3):
    """Median seconds of two functions timed in turns, so that drift in clocks or load over the
    run (large on a shared machine) hits both alike, and each one's mean minor page faults per
    call."""
    for _ in range(warmup):
        ours()
        theirs()
    times = ([], [])
    faults = [0, 0]
    for _ in range(repeats):
        for side, fn in enumerate((ours, theirs)):
            before = minor_faults()
            start = time.perf_counter()
            fn()
            times[side].append(time.perf_counter() - start)
            faults[side] += minor_faults() - before
    return (statistics.median(times[0]), statistics.median(times[1]), faults[0] / repeats,
            faults[1] / repeats)


def step_rows(label, measured):
    """The step's time row (with the ratio) and its page-fault row (without)."""
    ours, theirs, faults_ours, faults_theirs = measured
    return [(label + " (ms)", ours * 1e3, theirs * 1e3),
            ("  page faults per step", faults_ours, faults_theirs, None)]


def bench_torch(args):
    import torch
    import convjit.torch as ct

    x = torch.randn(1, 4, 4, 4)
    w = torch.randn(1, 1, 4, 4)
    rows = [("conv2d call, tiny (us)",
             median_seconds(lambda: ct.conv2d(x, w, [1, 1, 1, 1], "VALID"), args.calls) * 1e6,
             median_seconds(lambda: torch.nn.functional.conv2d(
                 x.permute(0, 3, 1, 2), w.permute(3, 2, 0, 1)), args.calls) * 1e6)]

    def block(conv):
        c1 = conv(args.channels, args.channels, 3, padding=1, bias=False)
        c2 = conv(args.channels, args.channels, 3, padding=1, bias=False)
        return torch.nn.ModuleList([c1, c2])

    torch.manual_seed(0)
    ours, theirs = block(ct.Conv2d), block(torch.nn.Conv2d)
    theirs.load_state_dict(ours.state_dict())
    batch = torch.randn(args.batch, args.channels, args.size, args.size)

    def step(m):
        opt = torch.optim.SGD(m.parameters(), lr=0.01)

        def run():
            opt.zero_grad()
            y = torch.relu(m[1](torch.relu(m[0](batch))) + batch)
            y.square().mean().backward()
            opt.step()
        return run

    rows += step_rows("ResNet block step", alternating_medians(step(ours), step(theirs),
                                                               args.steps))
    # The same with the modules and the batch in channels_last memory, the layout PyTorch's
    # own CPU convolutions prefer and the one convjit's NHWC kernels read without copies.
    ours.to(memory_format=torch.channels_last)
    theirs.to(memory_format=torch.channels_last)
    batch = batch.contiguous(memory_format=torch.channels_last)
    rows += step_rows("  channels_last", alternating_medians(step(ours), step(theirs),
                                                             args.steps))
    return "torch %s, %d threads" % (torch.__version__, torch.get_num_threads()), rows


def bench_jax(args):
    import jax
    import jax.numpy as jnp
    import convjit.jax as cj

    x = jnp.ones((1, 4, 4, 4), jnp.float32)
    w = jnp.ones((1, 1, 4, 4), jnp.float32)
    ours = jax.jit(lambda a, b: cj.conv2d(a, b, (1, 1, 1, 1), "VALID"))
    theirs = jax.jit(lambda a, b: jax.lax.conv_general_dilated(
        a, b, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")))
    rows = [("conv2d call, tiny (us)",
             median_seconds(lambda: ours(x, w).block_until_ready(), args.calls) * 1e6,
             median_seconds(lambda: theirs(x, w).block_until_ready(), args.calls) * 1e6)]

    def conv_ours(a, b):
        return cj.conv2d(a, b, (1, 1, 1, 1), "SAME")

    def conv_theirs(a, b):
        return jax.lax.conv_general_dilated(a, b, (1, 1), "SAME",
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))

    key = jax.random.PRNGKey(0)
    params = [jax.random.normal(k, (3, 3, args.channels, args.channels)) * 0.05
              for k in jax.random.split(key, 2)]
    batch = jax.random.normal(key, (args.batch, args.size, args.size, args.channels))

    def make_step(conv):
        def loss(p, x):
            y = jax.nn.relu(conv(jax.nn.relu(conv(x, p[0])), p[1]) + x)
            return jnp.mean(y * y)

        @jax.jit
        def step(p, x):
            g = jax.grad(loss)(p, x)
            return [a - 0.01 * b for a, b in zip(p, g)]
        return lambda: jax.block_until_ready(step(params, batch))

    rows += step_rows("ResNet block step", alternating_medians(
        make_step(conv_ours), make_step(conv_theirs), args.steps))
    return "jax %s" % jax.__version__, rows


def bench_tf(args):
    import tensorflow as tf
    import convjit.tf as ctf
    import convjit.keras as ck
    import keras

    x = tf.ones((1, 4, 4, 4))
    w = tf.ones((1, 1, 4, 4))
    rows = [("conv2d call, tiny (us)",
             median_seconds(lambda: ctf.conv2d(x, w, [1, 1, 1, 1], "VALID"), args.calls) * 1e6,
             median_seconds(lambda: tf.raw_ops.Conv2D(input=x, filter=w, strides=[1, 1, 1, 1],
                                                      padding="VALID"), args.calls) * 1e6)]

    def block(layers):
        inputs = keras.Input((args.size, args.size, args.channels))
        h = layers.Conv2D(args.channels, 3, padding="same", use_bias=False,
                          activation="relu")(inputs)
        h = layers.Conv2D(args.channels, 3, padding="same", use_bias=False)(h)
        return keras.Model(inputs, keras.layers.ReLU()(keras.layers.Add()([h, inputs])))

    keras.utils.set_random_seed(0)
    ours, theirs = block(ck), block(keras.layers)
    theirs.set_weights(ours.get_weights())
    batch = tf.random.normal((args.batch, args.size, args.size, args.channels))

    def make_step(model):
        opt = keras.optimizers.SGD(0.01)

        @tf.function
        def step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(batch)))
            grads = tape.gradient(loss, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
        return step

    rows += step_rows("ResNet block step", alternating_medians(make_step(ours),
                                                               make_step(theirs), args.steps))
    return "tensorflow %s" % tf.__version__, rows


BENCHES = {"torch": bench_torch, "jax": bench_jax, "tf": bench_tf}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default="torch,jax,tf")
    parser.add_argument("--steps", type=int, default=10, help="timed training steps")
    parser.add_argument("--calls", type=int, default=1000, help="timed tiny calls")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    parser.add_argument("--steady-malloc", action="store_true",
                        help="run with glibc's trim and mmap thresholds fixed (no page-fault "
                             "noise from the heap's trimming)")
    args = parser.parse_args()
    if args.steady_malloc and os.environ.get("GLIBC_TUNABLES") != STEADY_MALLOC:
        # The tunables are read when the process starts: start again with them.
        env = dict(os.environ, GLIBC_TUNABLES=STEADY_MALLOC)
        os.execve(sys.executable, [sys.executable] + sys.argv, env)
    if os.environ.get("GLIBC_TUNABLES"):
        print("GLIBC_TUNABLES=%s" % os.environ["GLIBC_TUNABLES"])
    args.batch, args.size, args.channels = (2, 8, 8) if args.quick else (8, 56, 64)
    if args.quick:
        args.steps, args.calls = min(args.steps, 2), min(args.calls, 20)
    print("ResNet block: batch %d, %dx%dx%d; median of %d steps, %d tiny calls" %
          (args.batch, args.size, args.size, args.channels, args.steps, args.calls))
    for name in args.frameworks.split(","):
        if name not in BENCHES:
            parser.error("unknown framework %r (torch, jax, tf)" % name)
        title, rows = BENCHES[name](args)
        print("\n%s\n%-26s %12s %12s %8s" % (title, "", "convjit", "own", "ratio"))
        for label, ours, theirs, *ratio in rows:
            print("%-26s %12.1f %12.1f %8s" % (label, ours, theirs,
                                                "" if ratio else "%.2f" % (theirs / ours)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
