"""Exact mode (one level) equals sequential PyTorch backprop in double, with TorchScript and
with plain Python step layers."""
import pytest
import torch
import torch.nn.functional as F

import weft
from conftest import Net, same_everywhere

TOL = 1e-12


def batch():
    g = torch.Generator().manual_seed(7)
    return (torch.randn(4, 5, generator=g, dtype=torch.float64),
            torch.randint(0, 3, (4,), generator=g))


def reference(net):
    """Loss, output and parameter gradients by plain backprop through the same network."""
    x, y = batch()
    seq = net.sequential()
    out = seq(x)
    loss = F.cross_entropy(out, y)
    loss.backward()
    return loss.item(), out.detach(), {n: p.grad for n, p in seq.named_parameters()}


@pytest.mark.parametrize("script", [True, False], ids=["torchscript", "python"])
@pytest.mark.parametrize("cache", [True, False], ids=["cached-graphs", "recomputed-graphs"])
def test_exact_mode_equals_sequential_backprop(comm, script, cache):
    net = Net(script=script)
    model = net.parallel(comm, weft.Options.exact().cache_graphs(cache))
    x, y = batch()
    out = model(x if model.owns_input else None)
    loss = model.loss(out, lambda logits: F.cross_entropy(logits, y))
    loss.backward()

    ref_loss, ref_out, ref_grads = reference(net)
    assert abs(loss.item() - ref_loss) <= TOL
    if model.owns_output:
        assert torch.allclose(out, ref_out, rtol=0, atol=TOL)
    names = [name for name, _ in model.named_parameters()]
    assert names, "every rank owns at least one layer"
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert torch.allclose(p.grad, ref_grads[name], rtol=0, atol=TOL), name
    # Every parameter of the network lives on exactly one rank.
    all_names = sum(comm.allgather(names), [])
    assert sorted(all_names) == sorted(ref_grads)


@pytest.mark.parametrize("script", [True, False], ids=["torchscript", "python"])
def test_an_optimizer_step_matches_the_sequential_one(comm, script):
    net = Net(script=script)
    model = net.parallel(comm)
    seq = net.sequential()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    seq_opt = torch.optim.SGD(seq.parameters(), lr=0.1, momentum=0.9)
    x, y = batch()
    for _ in range(2):
        opt.zero_grad()
        out = model(x if model.owns_input else None)
        model.loss(out, lambda logits: F.cross_entropy(logits, y)).backward()
        opt.step()
        seq_opt.zero_grad()
        F.cross_entropy(seq(x), y).backward()
        seq_opt.step()
    expected = dict(seq.named_parameters())
    for name, p in model.named_parameters():
        assert torch.allclose(p.detach(), expected[name].detach(), rtol=0, atol=TOL), name


def test_gather_sequential_returns_the_trained_network_on_the_root(comm):
    net = Net()
    model = net.parallel(comm)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.25)  # differs from what the factories build
    root = comm.size - 1
    full = model.gather_sequential(root)
    x, _ = batch()
    with torch.no_grad():
        out = model(x if model.owns_input else None)
    if comm.rank != root:
        assert full is None
        return
    assert isinstance(full, weft.SequentialNetwork)
    local = dict(model.named_parameters())
    for name, p in full.named_parameters():
        if name in local:
            assert torch.equal(p, local[name]), name
    with torch.no_grad():
        again = full(x)
    if model.owns_output:
        assert torch.allclose(out, again, rtol=0, atol=TOL)


def test_double_converts_float_layers_and_parameters_stay_shared(comm):
    net = Net()
    float_step = lambda n: torch.jit.script(net.step(n).float())  # noqa: E731
    model = weft.LayerParallel(comm, net.steps, net.t_final, float_step).double()
    for _, p in model.named_parameters():
        assert p.dtype == torch.float64
    x = torch.randn(4, 6, dtype=torch.float64)
    out = model(x if model.owns_input else None)
    model.loss(out, lambda o: o.square().sum()).backward()
    assert all(p.grad is not None and p.grad.dtype == torch.float64 for p in model.parameters())
    assert same_everywhere(comm, model.steps)


def test_statistics_report_the_last_batch(comm):
    model = Net().parallel(comm, weft.Options.multilevel(2, 2, 2, 1))
    x, y = batch()
    out = model(x if model.owns_input else None)
    model.loss(out, lambda logits: F.cross_entropy(logits, y)).backward()
    stats = model.statistics()
    assert stats["batch"] == 1
    assert stats["shape"] == [4, 6]
    assert stats["forward"]["iterations"] == 2
    assert stats["backward"]["iterations"] == 1
    assert sum(stats["forward"]["steps_per_level"]) > 0


def test_traced_step_layers_work_like_scripted_ones(comm):
    net = Net()
    example = torch.zeros(2, net.width, dtype=torch.float64)
    traced = lambda n: torch.jit.trace(Net(script=False).step(n), example)  # noqa: E731
    model = weft.LayerParallel(comm, net.steps, net.t_final, traced, open=net.open,
                               close=net.close)
    x, y = batch()
    out = model(x if model.owns_input else None)
    loss = model.loss(out, lambda logits: F.cross_entropy(logits, y))
    loss.backward()
    ref_loss, _, ref_grads = reference(net)
    assert abs(loss.item() - ref_loss) <= TOL
    for name, p in model.named_parameters():
        assert torch.allclose(p.grad, ref_grads[name], rtol=0, atol=TOL), name


def test_a_converged_multilevel_solve_approaches_backprop(comm):
    net = Net(steps=8)
    solve = weft.MgritOptions().max_levels(2).cfactor(2).abs_tol(1e-13).max_iterations(30)
    model = net.parallel(comm, weft.Options().forward(solve).backward(solve))
    x, y = batch()
    out = model(x if model.owns_input else None)
    loss = model.loss(out, lambda logits: F.cross_entropy(logits, y))
    loss.backward()
    ref_loss, _, ref_grads = reference(net)
    assert abs(loss.item() - ref_loss) <= 1e-9
    for name, p in model.named_parameters():
        assert torch.allclose(p.grad, ref_grads[name], rtol=0, atol=1e-9), name
    stats = model.statistics()
    assert stats["forward"]["converged"]
    # Each coarse adjoint step's graph is built at its first visit and reused by the later
    # iterations of the solve.
    assert stats["backward"]["iterations"] > 1
    assert stats["coarse_graphs_reused"] >= stats["coarse_graphs_built"]
    assert comm.allreduce(stats["coarse_graphs_reused"]) > 0


def test_without_loss_the_output_rank_backpropagates_its_own_loss(comm):
    net = Net()
    model = net.parallel(comm)
    x, y = batch()
    out = model(x if model.owns_input else None)
    if model.owns_output:
        F.cross_entropy(out, y).backward()
    else:
        out.backward()  # the placeholder: this rank's part of the adjoint solve
    _, _, ref_grads = reference(net)
    for name, p in model.named_parameters():
        assert torch.allclose(p.grad, ref_grads[name], rtol=0, atol=TOL), name


def test_inference_without_autograd_gives_the_same_output(comm):
    net = Net()
    model = net.parallel(comm).eval()
    x, _ = batch()
    with torch.no_grad():
        out = model(x if model.owns_input else None)
    _, ref_out, _ = reference(net)
    if model.owns_output:
        assert not out.requires_grad
        assert torch.allclose(out, ref_out, rtol=0, atol=TOL)
