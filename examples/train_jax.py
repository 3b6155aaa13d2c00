"""Trains a small CNN on synthetic data for a few steps with convjit.jax's convolutions and
with jax.lax.conv_general_dilated from the same initial weights, printing both losses.

    python examples/train_jax.py [--steps 5]

Exits non-zero when the losses drift apart beyond float32 round-off.
"""

import argparse
import sys

import jax
import jax.numpy as jnp

import convjit.jax as cj

ONE = (1, 1, 1, 1)


def conv_convjit(x, w, stride=1, depthwise=False):
    strides = (1, stride, stride, 1)
    if depthwise:
        return cj.depthwise_conv2d_native(x, w, strides, "SAME")
    return cj.conv2d(x, w, strides, "SAME")


def conv_lax(x, w, stride=1, depthwise=False):
    groups = 1
    if depthwise:
        kh, kw, c, m = w.shape
        w, groups = w.reshape(kh, kw, 1, c * m), c
    return jax.lax.conv_general_dilated(x, w, (stride, stride), "SAME",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                        feature_group_count=groups)


def init(key):
    k = jax.random.split(key, 4)
    return {"c1": jax.random.normal(k[0], (3, 3, 3, 16)) * 0.2,
            "dw": jax.random.normal(k[1], (3, 3, 16, 1)) * 0.2,
            "c2": jax.random.normal(k[2], (3, 3, 16, 32)) * 0.1,
            "fc": jax.random.normal(k[3], (32, 10)) * 0.1}


def loss_fn(conv, params, x, labels):
    h = jax.nn.relu(conv(x, params["c1"]))
    h = jax.nn.relu(conv(h, params["dw"], stride=2, depthwise=True))
    h = jax.nn.relu(conv(h, params["c2"]))
    logits = h.mean(axis=(1, 2)) @ params["fc"]
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    key = jax.random.PRNGKey(0)
    params = [init(key), init(key)]
    x = jax.random.normal(jax.random.PRNGKey(1), (16, 16, 16, 3))
    labels = jax.random.randint(jax.random.PRNGKey(2), (16,), 0, 10)
    steps = [jax.jit(jax.value_and_grad(lambda p, x, y, c=conv: loss_fn(c, p, x, y)))
             for conv in (conv_convjit, conv_lax)]
    worst = 0.0
    print("step  convjit      jax.lax      |diff|")
    for step in range(args.steps):
        losses = []
        for i in range(2):
            loss, grads = steps[i](params[i], x, labels)
            params[i] = jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, params[i], grads)
            losses.append(float(loss))
        diff = abs(losses[0] - losses[1])
        worst = max(worst, diff / max(1.0, abs(losses[1])))
        print("%4d  %.8f  %.8f  %.2e" % (step, losses[0], losses[1], diff))
    if worst > 1e-4:
        print("losses differ by %.2e (relative)" % worst, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
