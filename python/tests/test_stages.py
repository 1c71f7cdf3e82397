"""Multi-stage networks (transitions that change the state's width) and data x layer
parallelism from Python: exact mode equals a hand-written sequential PyTorch network (double),
and two replicas equal training with the global batch."""
import pytest
import torch
import torch.nn.functional as F

import weft
from conftest import Step, seeded

TOL = 1e-12
WIDTHS = [6, 4]  # stage 0 at width 6, stage 1 at width 4


class Transition(torch.nn.Module):
    def __init__(self, width_in, width_out):
        super().__init__()
        self.linear = torch.nn.Linear(width_in, width_out)

    def forward(self, x):
        return torch.relu(self.linear(x))


def stage_step(stage, script):
    def make(n):
        module = seeded(100 + n, lambda: Step(WIDTHS[stage]).double())
        return torch.jit.script(module) if script else module
    return make


def transition(n):
    return seeded(200 + n, lambda: Transition(WIDTHS[0], WIDTHS[1]).double())


def open_layer():
    return seeded(1, lambda: torch.nn.Linear(5, WIDTHS[0]).double())


def close_layer():
    return seeded(2, lambda: torch.nn.Linear(WIDTHS[1], 3).double())


def stages(script):
    return [weft.Stage(3, 1.0, stage_step(0, script), transition),
            weft.Stage(2, 1.5, stage_step(1, script))]


def reference():
    """Open, 3 steps (h 1/3), transition, 2 steps (h 0.75), close: written out by hand."""
    layers, sizes = [], []
    for n in range(3):
        layers.append(stage_step(0, False)(n))
        sizes.append(1.0 / 3)
    layers.append(transition(3))
    sizes.append(0.0)
    for n in range(4, 6):
        layers.append(stage_step(1, False)(n))
        sizes.append(0.75)
    return weft.SequentialNetwork(layers, sizes, open_layer(), close_layer())


def batch(rows=4, seed=7):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(rows, 5, generator=g, dtype=torch.float64),
            torch.randint(0, 3, (rows,), generator=g))


@pytest.mark.parametrize("script", [True, False], ids=["torchscript", "python"])
def test_stages_exact_mode_equals_sequential_backprop(comm, script):
    model = weft.LayerParallel(comm, stages=stages(script), open=open_layer, close=close_layer)
    assert model.steps == 6  # 5 residual steps and one transition
    x, y = batch()
    out = model(x if model.owns_input else None)
    loss = model.loss(out, lambda logits: F.cross_entropy(logits, y))
    loss.backward()
    seq = reference()
    ref_out = seq(x)
    ref_loss = F.cross_entropy(ref_out, y)
    ref_loss.backward()
    ref_grads = {n: p.grad for n, p in seq.named_parameters()}
    assert abs(loss.item() - ref_loss.item()) <= TOL
    if model.owns_output:
        assert torch.allclose(out, ref_out, rtol=0, atol=TOL)
    names = []
    for name, p in model.named_parameters():
        names.append(name)
        assert torch.allclose(p.grad, ref_grads[name], rtol=0, atol=TOL), name
    assert sorted(sum(comm.allgather(names), [])) == sorted(ref_grads)
    assert any(n.startswith("transition_3.") for n in ref_grads)


def test_stages_gather_sequential_rebuilds_the_chain(comm):
    model = weft.LayerParallel(comm, stages=stages(True), open=open_layer, close=close_layer)
    full = model.gather_sequential(0)
    if comm.rank == 0:
        assert full.step_sizes == pytest.approx([1 / 3] * 3 + [0.0] + [0.75] * 2)
        x, _ = batch()
        assert torch.allclose(full(x), reference()(x), rtol=0, atol=TOL)


def test_two_replicas_equal_training_with_the_global_batch(comm):
    if comm.size % 2:
        pytest.skip("needs an even number of ranks")
    per_replica = comm.size // 2
    layers = comm.Split(comm.rank // per_replica, comm.rank)
    data = comm.Split(comm.rank % per_replica, comm.rank)
    replica = comm.rank // per_replica
    model = weft.LayerParallel(layers, stages=stages(True), open=open_layer, close=close_layer,
                               data_comm=data)
    x, y = batch(8)
    half = slice(4 * replica, 4 * replica + 4)
    out = model(x[half] if model.owns_input else None)
    model.loss(out, lambda logits: F.cross_entropy(logits, y[half])).backward()
    seq = reference()
    F.cross_entropy(seq(x), y).backward()
    ref_grads = {n: p.grad for n, p in seq.named_parameters()}
    for name, p in model.named_parameters():
        assert torch.allclose(p.grad, ref_grads[name], rtol=1e-10, atol=1e-12), name
    layers.Free()
    data.Free()


class NormStep(torch.nn.Module):
    """A step with batch norm: its running statistics are buffers the C++ side only sees as
    plain buffers (no torch::nn::BatchNorm), in TorchScript and in Python alike."""

    def __init__(self, width):
        super().__init__()
        self.linear = torch.nn.Linear(width, width)
        self.norm = torch.nn.BatchNorm1d(width)

    def forward(self, x):
        return torch.tanh(self.norm(self.linear(x)))


def norm_step(script):
    def make(n):
        module = seeded(300 + n, lambda: NormStep(WIDTHS[0]).double())
        return torch.jit.script(module) if script else module
    return make


@pytest.mark.parametrize("script", [True, False], ids=["torchscript", "python"])
def test_batch_norm_steps_in_multilevel_mode_train_like_sequential_pytorch(comm, script):
    """Converged 3-level MGRIT with batch-norm steps written in Python: two SGD steps give the
    sequential network's parameters and running statistics (1e-10)."""
    steps = 6
    mg = weft.MgritOptions().max_levels(3).cfactor(2).nrelax(1).max_iterations(40).abs_tol(1e-13)
    options = weft.Options().forward(mg).backward(mg)
    model = weft.LayerParallel(comm, steps, 1.0, norm_step(script), open=open_layer,
                               close=lambda: seeded(2, lambda: torch.nn.Linear(WIDTHS[0], 3)
                                                    .double()),
                               options=options)
    seq = weft.SequentialNetwork([norm_step(False)(n) for n in range(steps)], [1.0 / steps] * steps,
                                 open_layer(), seeded(2, lambda: torch.nn.Linear(WIDTHS[0], 3)
                                                      .double()))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(seq.parameters(), lr=0.1)
    for k in range(2):
        x, y = batch(8, seed=11 + k)
        opt.zero_grad()
        out = model(x if model.owns_input else None)
        model.loss(out, lambda logits: F.cross_entropy(logits, y)).backward()
        opt.step()
        ref_opt.zero_grad()
        F.cross_entropy(seq(x), y).backward()
        ref_opt.step()
    ref = dict(seq.named_parameters())
    ref.update(dict(seq.named_buffers()))
    for name, t in list(model.named_parameters()) + list(model.named_buffers()):
        assert torch.allclose(t.to(ref[name].dtype), ref[name], rtol=0, atol=1e-10), name


class DropStep(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.linear = torch.nn.Linear(width, width)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return torch.tanh(self.drop(self.linear(x)))


@pytest.mark.parametrize("script", [True, False], ids=["torchscript", "python"])
def test_dropout_steps_use_one_mask_per_layer_and_batch_on_every_level(comm, script):
    """Every evaluation of a layer within a batch draws the same mask (layer streams): converged
    3-level MGRIT then equals exact mode (1e-10); with different masks it would not converge to
    it. The masks are really applied: eval mode gives another output."""
    steps = 6

    def step(n):
        module = seeded(400 + n, lambda: DropStep(WIDTHS[0]).double())
        return torch.jit.script(module) if script else module

    def close():
        return seeded(2, lambda: torch.nn.Linear(WIDTHS[0], 3).double())

    mg = weft.MgritOptions().max_levels(3).cfactor(2).nrelax(1).max_iterations(40).abs_tol(1e-13)
    x, y = batch(8, seed=21)
    results = []
    for options in (weft.Options.exact(), weft.Options().forward(mg).backward(mg)):
        model = weft.LayerParallel(comm, steps, 1.0, step, open=open_layer, close=close,
                                   options=options)
        out = model(x if model.owns_input else None)
        model.loss(out, lambda logits: F.cross_entropy(logits, y)).backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters()}
        model.train(False)
        with torch.no_grad():
            evaluated = model(x if model.owns_input else None)
        results.append((out.detach(), grads, evaluated))
    (exact_out, exact_grads, eval_out), (ml_out, ml_grads, _) = results
    assert torch.allclose(ml_out, exact_out, rtol=0, atol=1e-10)
    for name, g in exact_grads.items():
        assert torch.allclose(ml_grads[name], g, rtol=0, atol=1e-10), name
    if comm.rank == comm.size - 1:
        assert not torch.allclose(eval_out, exact_out, rtol=0, atol=1e-6)
    # Another seed draws other masks.
    options = weft.Options.exact().seed(7)
    assert options.seed() == 7
    other = weft.LayerParallel(comm, steps, 1.0, step, open=open_layer, close=close,
                               options=options)
    out = other(x if other.owns_input else None)
    if comm.rank == comm.size - 1:
        assert not torch.allclose(out.detach(), exact_out, rtol=0, atol=1e-6)


@pytest.mark.parametrize("script", [True, False], ids=["torchscript", "python"])
def test_sequential_network_draws_the_masks_of_the_layer_parallel_network(comm, script):
    """weft.SequentialNetwork in training mode applies the dropout masks weft.LayerParallel
    applies (the same layer streams, batch after batch): outputs and gradients agree to 1e-12,
    and the next batch draws new masks in both."""
    steps = 4

    def step(n):
        module = seeded(500 + n, lambda: DropStep(WIDTHS[0]).double())
        return torch.jit.script(module) if script else module

    def close():
        return seeded(3, lambda: torch.nn.Linear(WIDTHS[0], 3).double())

    model = weft.LayerParallel(comm, steps, 1.0, step, open=open_layer, close=close,
                               options=weft.Options.exact().seed(5))
    full = model.gather_sequential(0)
    if comm.rank == 0:
        assert full.seed == 5 and full.batch_index == 0
    outputs = []
    for k in range(2):
        x, y = batch(6, seed=30 + k)
        model.zero_grad()
        out = model(x if model.owns_input else None)
        model.loss(out, lambda logits: F.cross_entropy(logits, y)).backward()
        assert model.batch_index == k + 1
        grads = {name: p.grad.clone() for name, p in model.named_parameters()}
        gathered = comm.gather(grads, root=0)
        last = comm.bcast(out.detach() if comm.rank == comm.size - 1 else None,
                          root=comm.size - 1)
        if comm.rank == 0:
            full.zero_grad()
            ref = full(x)
            F.cross_entropy(ref, y).backward()
            assert full.batch_index == k + 1
            assert torch.allclose(last, ref.detach(), rtol=0, atol=1e-12)
            ref_grads = dict(full.named_parameters())
            for part in gathered:
                for name, g in part.items():
                    assert torch.allclose(g, ref_grads[name].grad, rtol=0, atol=1e-12), name
            outputs.append(ref.detach())
    if comm.rank == 0:
        # The masks really differ between the batches: the same input gives another output.
        x, _ = batch(6, seed=30)
        with torch.no_grad():
            again = full(x)
        assert not torch.allclose(again, outputs[0], rtol=0, atol=1e-6)
