"""weft.Recurrent from Python: a stacked GRU and LSTM over the sequence with MGRIT equal
torch.nn.GRU / torch.nn.LSTM with the same parameters (double, 1e-12 in exact mode, 1e-10 for
converged multilevel): outputs, final states, and the gradients of parameters, input and
initial state."""
import pytest
import torch

import weft

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
