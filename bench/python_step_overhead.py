#!/usr/bin/python3
"""Per-batch training time of weft.LayerParallel with TorchScript step layers against plain
Python step layers, on a network of many small layers (where per-call overhead shows), the two
alternated in one run; prints the medians and the ratio python / TorchScript.

    PYTHONPATH=build/python mpirun -np 2 /usr/bin/python3 bench/python_step_overhead.py \\
        [--steps 64] [--width 16] [--batch 8] [--batches 30] [--repeats 5]
"""
import argparse
import statistics
import time

from mpi4py import MPI
import torch
import torch.nn.functional as F

import weft


class Step(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.linear = torch.nn.Linear(width, width)

    def forward(self, x):
        return torch.tanh(self.linear(x))


def per_batch_ms(comm, args, script):
    make = (lambda n: torch.jit.script(Step(args.width))) if script else (
        lambda n: Step(args.width))
    model = weft.LayerParallel(comm, args.steps, 1.0, make)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(args.batch, args.width)
    times = []
    for _ in range(args.batches):
        comm.barrier()
        start = time.perf_counter()
        optimizer.zero_grad()
        out = model(x if model.owns_input else None)
        model.loss(out, lambda o: o.square().mean()).backward()
        optimizer.step()
        times.append(comm.allreduce(time.perf_counter() - start, op=MPI.MAX))
    return 1e3 * statistics.median(times[2:])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--batches", type=int, default=30)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    comm = MPI.COMM_WORLD
    torch.set_num_threads(1)
    script, python = [], []
    for _ in range(args.repeats):
        script.append(per_batch_ms(comm, args, True))
        python.append(per_batch_ms(comm, args, False))
    if comm.rank == 0:
        s, py = statistics.median(script), statistics.median(python)
        print(f"{comm.size} rank(s), {args.steps} steps of tanh(Linear({args.width})), batch "
              f"{args.batch}: median ms per batch over {args.repeats} repeats")
        print(f"TorchScript {s:.3f} ms, Python {py:.3f} ms, ratio python / TorchScript "
              f"{py / s:.2f}")


if __name__ == "__main__":
    main()
