#!/usr/bin/python3
"""Layer-parallel training of a residual image classifier on Fashion-MNIST with weft.

    mpirun -np 2 /usr/bin/python3 examples/python/train_mnist.py --steps 8 --epochs 1 \\
        --train-size 5000 --test-size 1000

The network is `weft train`'s (include/weft/models/image_resnet.hpp):
  open:  conv3x3 1->C + ReLU
  steps: N blocks  x <- x + h * ReLU(conv3x3(ReLU(conv3x3(x))))  at C channels, h = T/N
  close: flatten -> linear(C*H*W -> 32) -> ReLU -> linear(32 -> 10)
The flags follow TorchBraid's MNIST example (--steps --channels --lp-levels --lp-cfactor
--lp-fwd-iters --lp-bwd-iters --batch-size --epochs --train-size --seed); --lp-levels 1 (the
default) is the exact mode, which equals sequential backprop. --metrics FILE writes one JSON line
per epoch with the keys of `weft train --metrics`. Run with PYTHONPATH=build/python from a build
tree (or after `cmake --install`).
"""
import argparse
import json
import os
import sys
import time

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
    p.add_argument("--steps", type=int, default=8, help="residual steps N = layers (default 8)")
    p.add_argument("--channels", type=int, default=4, help="channels C (default 4)")
    p.add_argument("--tf", type=float, default=1.0, help="final time T, h = T/N (default 1)")
    p.add_argument("--lp-levels", type=int, default=1, help="MGRIT levels; 1 = exact (default)")
    p.add_argument("--lp-cfactor", type=int, default=4, help="coarsening factor (default 4)")
    p.add_argument("--lp-fwd-iters", type=int, default=2, help="forward iterations (default 2)")
    p.add_argument("--lp-bwd-iters", type=int, default=1, help="backward iterations (default 1)")
    p.add_argument("--batch-size", type=int, default=50, help="batch size (default 50)")
    p.add_argument("--epochs", type=int, default=2, help="epochs (default 2)")
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


def steady_mean(values):
    """Mean over batches, skipping the first two (warm-up) when there are more."""
    values = values[2:] if len(values) > 2 else values
    return sum(values) / len(values) if values else 0.0


def mean_or_none(values):
    return sum(values) / len(values) if values else None


def evaluate(model, images, labels, batch):
    model.eval()
    loss_sum = correct = 0.0
    with torch.no_grad():
        for start in range(0, len(labels), batch):
            x, y = images[start:start + batch], labels[start:start + batch]
            out = model(x if model.owns_input else None)
            if model.owns_output:
                loss_sum += F.cross_entropy(out, y, reduction="sum").item()
                correct += out.argmax(1).eq(y).sum().item()
    model.train()
    n = len(labels)
    return (model.broadcast_from_output(loss_sum) / n, model.broadcast_from_output(correct) / n)


def main(argv=None):
    args = parse(argv)
    comm = MPI.COMM_WORLD
    rank, ranks = comm.rank, comm.size
    torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // ranks))

    train_raw, train_labels = weft.data.load_split(args.data, "train", args.train_size)
    test_raw, test_labels = weft.data.load_split(args.data, "test", args.test_size)
    mean, std = weft.data.normalization(train_raw)
    train_images = weft.data.normalize(train_raw, mean, std)
    test_images = weft.data.normalize(test_raw, mean, std)
    height, width = train_images.shape[2], train_images.shape[3]

    model = weft.LayerParallel(comm, args.steps, args.tf, options=options(args),
                               **network(args, height, width))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    if rank == 0:
        print(f"train_mnist.py: layer-parallel on {ranks} rank(s), {len(train_labels)} training"
              f" / {len(test_labels)} test images {height}x{width} from {args.data}")
        print(f"  model: {args.steps} steps at {args.channels} channels, T {args.tf:g}, "
              f"{'Python' if args.python_steps else 'TorchScript'} layers; seed {args.seed}")
        print("  mgrit:\n    " + str(model.options).replace("\n", "\n    "), flush=True)
    metrics = open(args.metrics, "w") if args.metrics and rank == 0 else None

    count = len(train_labels)
    for epoch in range(1, args.epochs + 1):
        epoch_start = time.perf_counter()
        order = torch.randperm(count, generator=torch.Generator().manual_seed(
            args.seed * 7919 + epoch))  # the same on every rank
        fwd_ms, bwd_ms, opt_ms, fwd_it, bwd_it, fwd_res, bwd_res = ([] for _ in range(7))
        batch_ms = []  # wall time per loop iteration (the phases' maxima overstate it in a chain)
        batch_start = time.perf_counter()
        loss_sum = correct_sum = 0.0
        for start in range(0, count, args.batch_size):
            idx = order[start:start + args.batch_size]
            x, y = train_images[idx], train_labels[idx]
            optimizer.zero_grad()
            t0 = time.perf_counter()
            out = model(x if model.owns_input else None)
            t1 = time.perf_counter()
            correct = [0.0]

            def criterion(logits):
                correct[0] = logits.argmax(1).eq(y).sum().item()
                return F.cross_entropy(logits, y)

            loss = model.loss(out, criterion)
            loss_value = loss.item()
            loss.backward()
            t2 = time.perf_counter()
            optimizer.step()
            t3 = time.perf_counter()
            fwd_ms.append(1e3 * (t1 - t0))
            bwd_ms.append(1e3 * (t2 - t1))
            opt_ms.append(1e3 * (t3 - t2))
            batch_ms.append(1e3 * (t3 - batch_start))
            batch_start = t3
            s = model.statistics()
            fwd_it.append(s["forward"]["iterations"])
            bwd_it.append(s["backward"]["iterations"])
            if s["forward"]["final_residual"] is not None:
                fwd_res.append(s["forward"]["final_residual"])
            if s["backward"]["final_residual"] is not None:
                bwd_res.append(s["backward"]["final_residual"])
            loss_sum += loss_value * len(y)
            correct_sum += model.broadcast_from_output(correct[0])
        times = [comm.allreduce(steady_mean(v), op=MPI.MAX)
                 for v in (fwd_ms, bwd_ms, opt_ms, batch_ms)]
        test_loss, test_accuracy = evaluate(model, test_images, test_labels,
                                            max(args.batch_size, 500))
        record = {"epoch": epoch, "train_loss": loss_sum / count,
                  "train_accuracy": correct_sum / count, "test_loss": test_loss,
                  "test_accuracy": test_accuracy,
                  "epoch_seconds": time.perf_counter() - epoch_start,
                  "forward_ms": times[0], "backward_ms": times[1], "optimizer_ms": times[2],
                  "batch_ms": times[3],
                  "fwd_iterations": mean_or_none(fwd_it), "fwd_residual": mean_or_none(fwd_res),
                  "bwd_iterations": mean_or_none(bwd_it), "bwd_residual": mean_or_none(bwd_res),
                  "ranks": ranks, "serial": False}
        if rank == 0:
            print(f"epoch {epoch}: train loss {record['train_loss']:.4f} acc "
                  f"{record['train_accuracy']:.4f} | test loss {test_loss:.4f} acc "
                  f"{test_accuracy:.4f} | {record['epoch_seconds']:.1f} s | per batch: forward "
                  f"{times[0]:.1f} ms, backward {times[1]:.1f} ms, optimizer {times[2]:.2f} ms",
                  flush=True)
            if metrics:
                metrics.write(json.dumps(record) + "\n")
                metrics.flush()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except weft.Error as e:  # the same message on every rank: print it once
        if MPI.COMM_WORLD.rank == 0:
            print(f"train_mnist.py: {e}", file=sys.stderr)
        sys.exit(1)
