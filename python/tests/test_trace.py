"""Timelines from Python (weft.trace_start / trace_batch / trace_phase / trace_write): the file
holds every rank's traced batches, their phases and the solvers' steps on both levels, and its
sends match its waits; a phase name weft does not know is refused."""
import json
import os
import tempfile

import pytest
import torch
import torch.nn.functional as F

import weft
from conftest import Net


def test_a_traced_python_training_loop_writes_every_ranks_batches_and_steps(comm):
    net = Net(steps=6)
    model = net.parallel(comm, weft.Options.multilevel(2, 2, 2, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    folder = comm.bcast(tempfile.mkdtemp() if comm.rank == 0 else None, root=0)
    path = os.path.join(folder, "python.trace.json")
    g = torch.Generator().manual_seed(3)
    x, y = torch.randn(4, 5, generator=g, dtype=torch.float64), torch.randint(0, 3, (4,), generator=g)
    weft.trace_start(first_batch=1, batches=2)
    for k in range(4):
        with weft.trace_batch(k):
            opt.zero_grad()
            with weft.trace_phase("forward"):
                out = model(x if model.owns_input else None)
            with weft.trace_phase("backward"):
                model.loss(out, lambda logits: F.cross_entropy(logits, y)).backward()
            with weft.trace_phase("optimizer"):
                opt.step()
    weft.trace_write(path, comm)
    if comm.rank == 0:
        with open(path) as f:
            trace = json.load(f)
        assert trace["otherData"]["ranks"] == comm.size
        events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
        for rank in range(comm.size):
            mine = [e for e in events if e["pid"] == rank]
            batches = sorted(e["args"]["batch"] for e in mine if e["name"] == "batch")
            assert batches == [1, 2], (rank, batches)
            for name in ("forward", "backward", "optimizer"):
                assert sum(e["name"] == name for e in mine) == 2, (rank, name)
            levels = {(e["cat"], e["args"]["level"]) for e in mine if e["name"] == "step"}
            assert levels == {("forward", 0), ("forward", 1), ("reverse", 0), ("reverse", 1)}, levels
        sends = sorted((e["pid"], e["args"]["peer"], e["args"]["tag"]) for e in events
                       if e["args"]["kind"] == "send" and "group" not in e["args"])
        waits = sorted((e["args"]["peer"], e["pid"], e["args"]["tag"]) for e in events
                       if e["args"]["kind"] == "wait" and "peer" in e["args"] and "group" not in e["args"])
        assert sends == waits
        os.remove(path)
        os.rmdir(folder)
    comm.Barrier()


def test_an_unknown_phase_is_refused():
    with pytest.raises(weft.InvalidOption, match="accepted: forward, backward, optimizer"):
        weft.trace_phase("warmup")
