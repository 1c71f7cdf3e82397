#!/usr/bin/python3
"""Layer-parallel training of a residual image classifier on Fashion-MNIST with weft.

    mpirun -np 2 /usr/bin/python3 examples/python/train_mnist.py --steps 8 --epochs 1 \\
        --train-size 5000 --test-size 1000

The network is `weft train`'s (include/weft/models/image_resnet.hpp):
  open:  conv3x3 1->C + ReLU
  steps: N blocks  x <- x + h * ReLU(conv3x3(ReLU(conv3x3(x))))  at C channels, h = T/N
  close: flatten -> linear(C*H*W -> 32) -> ReLU -> linear(32 -> 10)
The network is defined here, in Python; weft.Trainer (the C++ loop `weft train` runs) trains
it: shuffles, batches, Adam, evaluation, metrics. The flags follow TorchBraid's MNIST example
(--steps --channels --lp-levels --lp-cfactor --lp-fwd-iters --lp-bwd-iters --batch-size --epochs
--train-size --seed); --lp-levels 1 (the default) is the exact mode, which equals sequential
backprop. --metrics FILE writes one JSON line per epoch with the keys of `weft train --metrics`.
Run with PYTHONPATH=build/python from a build tree (or after `cmake --install`).
"""
import argparse
import json
import sys

from mpi4py import MPI
import torch
import torch.nn as nn
import torch.nn.functional as F

import weft
import weft.data


class OpenLayer(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(1, channels, 3, padding=1)

    def forward(self, x):
        return F.relu(self.conv(x))


class StepLayer(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return F.relu(self.conv2(F.relu(self.conv1(x))))


class CloseLayer(nn.Module):
    def __init__(self, channels, height, width, hidden=32, classes=10):
        super().__init__()
        self.fc1 = nn.Linear(channels * height * width, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


def seeded(seed, make):
    """Each layer's initial parameters depend on (seed, layer) only, never on the rank count."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return make()


def network(args, height, width):
    """The factories weft.LayerParallel takes: step(n), open(), close()."""
    wrap = (lambda m: m) if args.python_steps else torch.jit.script
    c = args.channels
    return dict(
        step=lambda n: wrap(seeded(args.seed * 1000003 + n, lambda: StepLayer(c))),
        open=lambda: wrap(seeded(args.seed ^ 0x6F70656E, lambda: OpenLayer(c))),
        close=lambda: wrap(seeded(args.seed ^ 0x636C6F73, lambda: CloseLayer(c, height, width))),
    )


def options(args):
    if args.lp_levels == 1:
        return weft.Options.exact()
    return weft.Options.multilevel(args.lp_levels, args.lp_cfactor, args.lp_fwd_iters,
                                   args.lp_bwd_iters)


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=weft.data.FASHION_MNIST, help="MNIST-format data folder")
    for flag, default, text in (("--steps", 8, "residual steps N = layers"),
                                ("--channels", 4, "channels C"),
                                ("--lp-levels", 1, "MGRIT levels; 1 = exact"),
                                ("--lp-cfactor", 4, "coarsening factor"),
                                ("--lp-fwd-iters", 2, "forward iterations"),
                                ("--lp-bwd-iters", 1, "backward iterations"),
                                ("--batch-size", 50, "batch size"), ("--epochs", 2, "epochs")):
        p.add_argument(flag, type=int, default=default, help=f"{text} (default {default})")
    p.add_argument("--tf", type=float, default=1.0, help="final time T, h = T/N (default 1)")
    p.add_argument("--train-size", type=int, default=-1, help="training images (default all)")
    p.add_argument("--test-size", type=int, default=-1, help="test images (default all)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default 1e-3)")
    p.add_argument("--seed", type=int, default=1, help="initialisation and shuffle seed")
    p.add_argument("--threads", type=int, default=0, help="torch threads per rank (cores/ranks)")
    p.add_argument("--python-steps", action="store_true",
                   help="plain Python layers instead of TorchScript (slower: run under the GIL)")
    p.add_argument("--metrics", metavar="FILE", help="one JSON line per epoch (as weft train)")
    args = p.parse_args(argv)
    for name in ("steps", "channels", "lp_levels", "lp_cfactor", "lp_fwd_iters",
                 "lp_bwd_iters", "batch_size", "epochs"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')}: {getattr(args, name)} is invalid; "
                    "accepted: an integer >= 1")
    return args


class Report:
    """An observer: one line per epoch on rank 0, and the --metrics JSON lines."""

    def __init__(self, metrics):
        self.metrics = metrics

    def epoch_done(self, d):
        if d["rank"] != 0:
            return
        print(f"epoch {d['epoch']}: train loss {d['train_loss']:.4f} acc {d['train_accuracy']:.4f}"
              f" | test loss {d['test_loss']:.4f} acc {d['test_accuracy']:.4f} | "
              f"{d['epoch_seconds']:.1f} s | per batch {d['batch_ms']:.1f} ms", flush=True)
        if self.metrics:
            with open(self.metrics, "a") as out:
                out.write(json.dumps({k: v for k, v in d.items() if k != "rank"}) + "\n")


def main(argv=None):
    args = parse(argv)
    comm = MPI.COMM_WORLD
    train_raw, train_labels = weft.data.load_split(args.data, "train", args.train_size)
    test_raw, test_labels = weft.data.load_split(args.data, "test", args.test_size)
    mean, std = weft.data.normalization(train_raw)
    height, width = train_raw.shape[2], train_raw.shape[3]
    if args.metrics and comm.rank == 0:
        open(args.metrics, "w").close()
    trainer = weft.Trainer(
        comm, (weft.data.normalize(train_raw, mean, std), train_labels),
        (weft.data.normalize(test_raw, mean, std), test_labels),
        network=dict(steps=args.steps, t_final=args.tf, **network(args, height, width)),
        normalization=(mean, std), seed=args.seed, parallel=options(args), batch=args.batch_size,
        epochs=args.epochs, lr=args.lr, threads=args.threads, observers=[Report(args.metrics)])
    if comm.rank == 0:
        print(f"train_mnist.py: layer-parallel on {comm.size} rank(s), {len(train_labels)} "
              f"training / {len(test_labels)} test images {height}x{width} from {args.data}")
        print(f"  model: {args.steps} steps at {args.channels} channels, T {args.tf:g}, "
              f"{'Python' if args.python_steps else 'TorchScript'} layers; seed {args.seed}")
        print("  mgrit:\n    " + str(options(args)).replace("\n", "\n    "), flush=True)
    trainer.fit()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except weft.Error as e:  # the same message on every rank: print it once
        if MPI.COMM_WORLD.rank == 0:
            print(f"train_mnist.py: {e}", file=sys.stderr)
        sys.exit(1)
