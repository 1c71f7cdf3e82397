"""Shared pieces of the weft Python tests. They run under mpiexec at 1-3 ranks (ctest
python_module_np*): every test is collective, so each rank runs the same tests in order."""
import pytest
import torch
from mpi4py import MPI

import weft

torch.set_num_threads(1)


def seeded(seed, make):
    """make() with the global generator at `seed`, restored afterwards."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return make()


class Step(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.linear = torch.nn.Linear(width, width)

    def forward(self, x):
        return torch.tanh(self.linear(x))


class Net:
    """A small network as factories: open Linear(5->6), steps tanh(Linear(6->6)), close
    Linear(6->3), in double; script=True gives TorchScript step layers."""

    def __init__(self, steps=6, script=True, width=6):
        self.steps, self.script, self.width, self.t_final = steps, script, width, 1.5

    def step(self, n):
        module = seeded(100 + n, lambda: Step(self.width).double())
        return torch.jit.script(module) if self.script else module

    def open(self):
        return seeded(1, lambda: torch.nn.Linear(5, self.width).double())

    def close(self):
        return seeded(2, lambda: torch.nn.Linear(self.width, 3).double())

    def parallel(self, comm=None, options=None):
        return weft.LayerParallel(comm or MPI.COMM_WORLD, self.steps, self.t_final, self.step,
                                  open=self.open, close=self.close, options=options)

    def sequential(self):
        return weft.SequentialNetwork.build(self.steps, self.t_final, self.step, self.open,
                                            self.close)


@pytest.fixture
def comm():
    return MPI.COMM_WORLD


def same_everywhere(comm, value):
    """True when `value` is equal on every rank."""
    values = comm.allgather(value)
    return all(v == values[0] for v in values)
