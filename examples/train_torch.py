"""Trains a small CNN on synthetic data for a few steps with convjit.torch.Conv2d and with
torch.nn.Conv2d from the same initial weights, printing both losses step by step.

    python examples/train_torch.py [--steps 5]

Exits non-zero when the losses drift apart beyond float32 round-off.
"""

import argparse
import copy
import sys

import torch

import convjit.torch as ct


def model(conv):
    return torch.nn.Sequential(
        conv(3, 16, 3, padding=1), torch.nn.ReLU(),
        conv(16, 16, 3, stride=2, padding=1, groups=16), torch.nn.ReLU(),
        conv(16, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    ours = model(ct.Conv2d)
    theirs = model(torch.nn.Conv2d)
    theirs.load_state_dict(copy.deepcopy(ours.state_dict()))
    x = torch.randn(16, 3, 16, 16)
    labels = torch.randint(0, 10, (16,))
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (ours, theirs)]
    worst = 0.0
    print("step  convjit      torch        |diff|")
    for step in range(args.steps):
        losses = []
        for m, opt in zip((ours, theirs), optimizers):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(x), labels)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        diff = abs(losses[0] - losses[1])
        worst = max(worst, diff / max(1.0, abs(losses[1])))
        print("%4d  %.8f  %.8f  %.2e" % (step, losses[0], losses[1], diff))
    if worst > 1e-4:
        print("losses differ by %.2e (relative)" % worst, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
