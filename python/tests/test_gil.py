"""TorchScript step layers run without the GIL: while a forward solve runs in one Python thread,
another Python thread gets to run. Layer 0 spins until that other thread, which waits until it
spins, sets a flag (or gives up after BOUND rounds); with the GIL held through the solve, the
other thread could only look after the layer gave up."""
import threading
import time

import torch

import weft

BOUND = 300_000


class Waiter(torch.nn.Module):
    def __init__(self, flag, rounds):
        super().__init__()
        self.register_buffer("flag", flag)
        self.register_buffer("rounds", rounds)
        self.bound = BOUND

    def forward(self, x):
        i = 0
        while bool(self.flag[0] == 0) and i < self.bound:
            i += 1
            self.rounds[0] = i
        return x * 0.0


class Zero(torch.nn.Module):
    def forward(self, x):
        return x * 0.0


def test_another_python_thread_runs_during_a_torchscript_forward(comm):
    flag = torch.ones(1)  # set: the setup forward below does not wait
    rounds = torch.zeros(1, dtype=torch.long)
    model = weft.LayerParallel(
        comm, max(2, comm.size), 1.0,
        lambda n: torch.jit.script(Waiter(flag, rounds) if n == 0 else Zero()))
    x = torch.zeros(2, 3)

    def forward():
        with torch.no_grad():
            model(x if model.owns_input else None)

    forward()  # layer checks and solver setup
    flag.zero_()
    thread = threading.Thread(target=forward)
    thread.start()
    if model.owns_input:  # layer 0 lives on rank 0: wait until it spins
        while rounds.item() == 0 and thread.is_alive():
            time.sleep(0.001)
    flag.fill_(1)  # reaches layer 0 in time only if this thread runs during the solve
    thread.join()
    if model.owns_input:
        assert rounds.item() < BOUND
