"""Trains a small Keras CNN on synthetic data for a few steps with convjit.keras layers and
with Keras' own from the same initial weights, printing both losses step by step.

    python examples/train_tf.py [--steps 5]

Exits non-zero when the losses drift apart beyond float32 round-off.
"""

import argparse
import sys

import numpy as np
import keras

import convjit.keras as ck


def model(layers):
    return keras.Sequential([
        keras.Input((16, 16, 3)),
        layers.Conv2D(16, 3, padding="same", activation="relu"),
        layers.DepthwiseConv2D(3, strides=2, padding="same", activation="relu"),
        layers.Conv2D(32, 3, padding="same", activation="relu"),
        keras.layers.GlobalAveragePooling2D(),
        keras.layers.Dense(10),
    ])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    keras.utils.set_random_seed(0)
    ours, theirs = model(ck), model(keras.layers)
    theirs.set_weights(ours.get_weights())
    rng = np.random.default_rng(1)
    x = rng.standard_normal((16, 16, 16, 3)).astype(np.float32)
    labels = rng.integers(0, 10, 16)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for m in (ours, theirs):
        m.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9), loss=loss)
    worst = 0.0
    print("step  convjit      keras        |diff|")
    for step in range(args.steps):
        losses = [float(m.train_on_batch(x, labels)) for m in (ours, theirs)]
        diff = abs(losses[0] - losses[1])
        worst = max(worst, diff / max(1.0, abs(losses[1])))
        print("%4d  %.8f  %.8f  %.2e" % (step, losses[0], losses[1], diff))
    if worst > 1e-4:
        print("losses differ by %.2e (relative)" % worst, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
