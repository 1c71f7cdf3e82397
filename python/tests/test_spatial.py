"""Spatial coarsening from Python (weft.Options.spatial_levels, spatial_kernels,
spatial_running_statistics): the options reach the solves, and a converged solve with coarse
levels restricted in space gives backprop's gradients whatever the coarse kernels."""
import pytest
import torch
import torch.nn.functional as F

import weft
from conftest import seeded

STEPS, SIDE = 4, 8


class ConvStep(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv2d(2, 2, 3, padding=1)
        self.b = torch.nn.Conv2d(2, 2, 3, padding=1)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


def conv_step(n, script):
    step = seeded(100 + n, lambda: ConvStep().double())
    return torch.jit.script(step) if script else step


def conv_net(comm, options, script):
    return weft.LayerParallel(
        comm, STEPS, 1.0, lambda n: conv_step(n, script),
        open=lambda: seeded(1, lambda: torch.nn.Conv2d(1, 2, 3, padding=1).double()),
        close=lambda: seeded(2, lambda: torch.nn.Sequential(
            torch.nn.Flatten(), torch.nn.Linear(2 * SIDE * SIDE, 3)).double()),
        options=options)


def gradients(comm, options, script=False):
    """Every rank's parameter gradients (all ranks' together, by name) after one batch, with
    eager or TorchScript step layers."""
    model = conv_net(comm, options, script)
    x = seeded(5, lambda: torch.randn(3, 1, SIDE, SIDE, dtype=torch.float64))
    y = torch.tensor([0, 2, 1])
    out = model(x if model.owns_input else None)
    model.loss(out, lambda logits: F.cross_entropy(logits, y)).backward()
    grads = {}
    for part in comm.allgather({n: p.grad.clone() for n, p in model.named_parameters()}):
        grads.update(part)
    return grads


def solve(iterations):
    return (weft.MgritOptions().max_levels(2).cfactor(2).nrelax(1)
            .max_iterations(iterations).abs_tol(1e-13))


def spatial(iterations, kernels):
    return (weft.Options().forward(solve(iterations)).backward(solve(iterations))
            .spatial_levels([0, 1]).spatial_kernels(kernels))


def test_the_spatial_options_round_trip_and_are_reported():
    o = weft.Options.multilevel(2, 2, 1, 1).spatial_levels([0, 1], [0, 0])
    assert o.spatial_levels() == ([0, 1], [0, 0])
    assert o.spatial_kernels() == "same" and o.spatial_running_statistics()
    o.spatial_kernels("galerkin").spatial_running_statistics(False)
    assert o.spatial_kernels() == "galerkin" and not o.spatial_running_statistics()
    assert "kernels there: galerkin" in str(o) and "own statistics" in str(o)
    assert weft.Options().spatial_levels([0, 1]).spatial_levels() == ([0, 1], [0, 1])
    with pytest.raises(weft.InvalidOption, match="accepted: same, moments, galerkin"):
        weft.Options().spatial_kernels("bilinear")


@pytest.mark.parametrize("kernels", ["same", "galerkin"])
def test_a_converged_solve_coarse_in_space_gives_backprops_gradients(comm, kernels):
    exact = gradients(comm, weft.Options.exact())
    got = gradients(comm, spatial(30, kernels))
    assert got.keys() == exact.keys()
    for name, g in got.items():
        assert torch.allclose(g, exact[name], rtol=0, atol=1e-9), name


def test_the_coarse_kernels_reach_eager_and_torchscript_layers(comm):
    # One iteration: the coarse kernels change the gradients, and eager and TorchScript layers
    # (each with its own way of swapping kernels) give the same ones.
    runs = {(kernels, script): gradients(comm, spatial(1, kernels), script)
            for kernels in ("same", "galerkin") for script in (False, True)}
    for script in (False, True):
        same, galerkin = runs["same", script], runs["galerkin", script]
        assert max((galerkin[n] - same[n]).abs().max().item() for n in same) > 1e-6, script
    for kernels in ("same", "galerkin"):
        eager, scripted = runs[kernels, False], runs[kernels, True]
        for name, g in eager.items():
            assert torch.allclose(g, scripted[name], rtol=0, atol=1e-12), (kernels, name)
