"""weft.Recurrent from Python: a stacked GRU and LSTM over the sequence with MGRIT equal
torch.nn.GRU / torch.nn.LSTM with the same parameters (double, 1e-12 in exact mode, 1e-10 for
converged multilevel): outputs, final states, and the gradients of parameters, input and
initial state. The cell options (implicit_step, implicit_iterations, coarse_input) and
forward_local (each rank passes its own rows) against the implicit cell's definition run here."""
import pytest
import torch

import weft
from conftest import seeded

TOL = 1e-12


def reference(cell, layers):
    cls = torch.nn.GRU if cell == "gru" else torch.nn.LSTM
    return cls(2, 3, num_layers=layers).double()


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("multilevel", [False, True], ids=["exact", "multilevel"])
def test_recurrent_equals_torch_rnn(comm, cell, multilevel):
    length, batch, layers = 7, 2, 2
    options = None
    tol = TOL
    if multilevel:
        mg = weft.MgritOptions().max_levels(3).cfactor(2).nrelax(1).max_iterations(40) \
            .abs_tol(1e-13)
        options = weft.Options().forward(mg).backward(mg)
        tol = 1e-10
    model = weft.Recurrent(comm, cell, 2, 3, num_layers=layers, output_sequence=True,
                           options=options).double()
    ref = reference(cell, layers)
    with torch.no_grad():
        own = dict(model.named_parameters())
        for name, p in ref.named_parameters():
            p.copy_(own[name])  # weft's parameters came from rank 0 and are the same everywhere
    g = torch.Generator().manual_seed(5)
    x = torch.randn(length, batch, 2, generator=g, dtype=torch.float64)
    h0 = torch.randn(layers, batch, 3, generator=g, dtype=torch.float64)
    c0 = torch.randn(layers, batch, 3, generator=g, dtype=torch.float64)
    xs = [x.clone().requires_grad_(True) for _ in range(2)]
    hs = [h0.clone().requires_grad_(True) for _ in range(2)]
    cs = [c0.clone().requires_grad_(True) for _ in range(2)]
    out, h_n, c_n = model(xs[0], hs[0], cs[0] if cell == "lstm" else None)
    if cell == "gru":
        ref_out, ref_h = ref(xs[1], hs[1])
        assert c_n is None
        loss = out.sum() + (h_n ** 2).sum()
        ref_loss = ref_out.sum() + (ref_h ** 2).sum()
    else:
        ref_out, (ref_h, ref_c) = ref(xs[1], (hs[1], cs[1]))
        assert torch.allclose(c_n, ref_c, rtol=0, atol=tol)
        loss = out.sum() + (h_n ** 2).sum() + c_n.sum()
        ref_loss = ref_out.sum() + (ref_h ** 2).sum() + ref_c.sum()
    assert torch.allclose(out, ref_out, rtol=0, atol=tol)
    assert torch.allclose(h_n, ref_h, rtol=0, atol=tol)
    loss.backward()
    ref_loss.backward()
    for name, p in ref.named_parameters():
        assert torch.allclose(own[name].grad, p.grad, rtol=0, atol=tol), name
    assert torch.allclose(xs[0].grad, xs[1].grad, rtol=0, atol=tol)
    assert torch.allclose(hs[0].grad, hs[1].grad, rtol=0, atol=tol)
    if cell == "lstm":
        assert torch.allclose(cs[0].grad, cs[1].grad, rtol=0, atol=tol)


def test_recurrent_bad_input_is_the_same_error_on_every_rank(comm):
    with pytest.raises(weft.InvalidOption):
        weft.Recurrent(comm, "rnn", 2, 3)
    model = weft.Recurrent(comm, "gru", 2, 3).double()
    with pytest.raises(weft.BadData):
        model(torch.randn(comm.size + 1, 2, 5, dtype=torch.float64))  # 5 features, not 2


def implicit_reference(cell, layers, dt, iterations, x, h0, c0, ref):
    """The implicit cell run sequentially from its definition: y <- (s + dt Φ(y, x_t)) / (1 + dt)
    `iterations` times from y = s, Φ one step of torch's stacked cells (`ref`)."""
    h, c = h0, c0
    outputs = []
    for t in range(x.shape[0]):
        yh, yc = h, c
        for _ in range(iterations):
            if cell == "gru":
                _, ph = ref(x[t:t + 1], yh)
            else:
                _, (ph, pc) = ref(x[t:t + 1], (yh, yc))
                yc = (c + dt * pc) / (1 + dt)
            yh = (h + dt * ph) / (1 + dt)
        h, c = yh, yc
        outputs.append(h[-1])
    return torch.stack(outputs), h, c


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.parametrize("distributed", [False, True], ids=["replicated", "distributed"])
def test_implicit_cell_equals_its_sequential_definition(comm, cell, distributed):
    """implicit_step / implicit_iterations reach the cell, and forward_local (each rank its own
    rows) gives forward's rows: outputs, final states and every gradient, double, 1e-12."""
    length, batch, layers, dt, iterations = 7, 2, 2, 0.7, 2
    model = weft.Recurrent(comm, cell, 2, 3, num_layers=layers, output_sequence=True,
                           implicit_step=dt, implicit_iterations=iterations).double()
    ref = reference(cell, layers)
    with torch.no_grad():
        own = dict(model.named_parameters())
        for name, p in ref.named_parameters():
            p.copy_(own[name])
    g = torch.Generator().manual_seed(9)
    x = torch.randn(length, batch, 2, generator=g, dtype=torch.float64)
    h0 = torch.randn(layers, batch, 3, generator=g, dtype=torch.float64)
    c0 = torch.randn(layers, batch, 3, generator=g, dtype=torch.float64) if cell == "lstm" else None
    w = torch.randn(length, batch, 3, generator=g, dtype=torch.float64)
    first, end = model.local_steps(length) if distributed else (0, length)
    xr = x.clone().requires_grad_(True)
    xw = x[first:end].clone().requires_grad_(True)
    ref_out, ref_h, ref_c = implicit_reference(cell, layers, dt, iterations, xr, h0, c0, ref)
    if distributed:
        out, h_n, c_n = model.forward_local(xw, h0, c0)
    else:
        out, h_n, c_n = model(xw, h0, c0)
    assert out.shape == (end - first, batch, 3)
    assert torch.allclose(out, ref_out[first:end], rtol=0, atol=TOL)
    assert torch.allclose(h_n, ref_h, rtol=0, atol=TOL)
    if cell == "lstm":
        assert torch.allclose(c_n, ref_c, rtol=0, atol=TOL)
    # distributed: each rank's output terms; the h_n terms count once
    ((out * w[first:end]).sum() + (h_n ** 2).sum()).backward()
    ((ref_out * w).sum() + (ref_h ** 2).sum()).backward()
    for name, p in ref.named_parameters():
        assert torch.allclose(own[name].grad, p.grad, rtol=0, atol=TOL), name
    assert torch.allclose(xw.grad, xr.grad[first:end], rtol=0, atol=TOL)


def test_coarse_input_reaches_the_coarse_steps(comm):
    """Unconverged 3-level MGRIT (2 iterations) differs between coarse_input 'start' and
    'mean' (only coarse steps read it); iterated to convergence both equal torch's GRU."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(12, 2, 2, generator=g, dtype=torch.float64)
    ref = seeded(11, lambda: reference("gru", 1))  # the same parameters on every rank
    _, ref_h = ref(x)
    results = {}
    for iterations, tol in [(2, 0.0), (40, 1e-13)]:
        mg = weft.MgritOptions().max_levels(3).cfactor(2).nrelax(1).max_iterations(iterations) \
            .abs_tol(tol)
        for coarse in ["start", "mean"]:
            model = weft.Recurrent(comm, "gru", 2, 3, options=weft.Options().forward(mg)
                                   .backward(mg), coarse_input=coarse).double()
            with torch.no_grad():
                own = dict(model.named_parameters())
                for name, p in ref.named_parameters():
                    own[name].copy_(p)
            results[iterations, coarse] = model(x)[1]
    assert (results[2, "start"] - results[2, "mean"]).abs().max() > 1e-8
    for coarse in ["start", "mean"]:
        assert torch.allclose(results[40, coarse], ref_h, rtol=0, atol=1e-10)


def test_recurrent_bad_cell_options_raise_clear_errors_on_every_rank(comm):
    cases = [({"coarse_input": "middle"}, weft.InvalidOption, "coarse_input"),
             ({"implicit_step": -0.5}, weft.InvalidOption, "implicit_step"),
             ({"implicit_step": float("nan")}, weft.InvalidOption, "implicit_step"),
             ({"implicit_iterations": 0}, weft.InvalidOption, "implicit_iterations"),
             ({"implicit_iterations": 2**31}, weft.InvalidOption, "at most 2147483647"),
             ({"implicit_iterations": 1.5}, TypeError, "implicit_iterations"),
             ({"implicit_step": "0.5"}, TypeError, "implicit_step"),
             ({"coarse_input": None}, TypeError, "coarse_input")]
    for kwargs, kind, name in cases:
        with pytest.raises(kind, match=name):
            weft.Recurrent(comm, "gru", 2, 3, **kwargs)
    model = weft.Recurrent(comm, "gru", 2, 3).double()
    first, end = model.local_steps(2 * comm.size + 1)
    rows, features = end - first, 2
    if comm.size == 1:
        features = 5  # one rank's chunk is always its share: a wrong feature count instead
    elif comm.rank == 0:
        rows += 1  # one row moves from the last rank to rank 0: the total is right
    elif comm.rank == comm.size - 1:
        rows -= 1
    with pytest.raises(weft.BadData):
        model.forward_local(torch.zeros(rows, 2, features, dtype=torch.float64))
