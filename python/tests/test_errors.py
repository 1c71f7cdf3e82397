"""Bad input arrives as the same Python exception, with the same message, on every rank, and
no rank hangs."""
import pytest
import torch
import torch.nn.functional as F

import weft
from conftest import Net, Step, same_everywhere


def raised(comm, kind, call):
    """The message of the `kind` exception call() raised here, checked equal on every rank."""
    with pytest.raises(kind) as info:
        call()
    message = str(info.value)
    assert same_everywhere(comm, message), message
    return message


def test_a_communicator_that_is_not_mpi4py_is_a_type_error(comm):
    message = raised(comm, TypeError, lambda: weft.LayerParallel(42, 4, 1.0, Net().step))
    assert "mpi4py communicator" in message and "int" in message


def test_a_module_instead_of_a_factory_is_a_type_error(comm):
    message = raised(comm, TypeError,
                     lambda: weft.LayerParallel(comm, 4, 1.0, Step(6).double()))
    assert "factory" in message


def test_fewer_steps_than_ranks_is_an_invalid_option(comm):
    message = raised(comm, weft.InvalidOption,
                     lambda: weft.LayerParallel(comm, comm.size - 1, 1.0, Net().step))
    assert "step layer" in message


def test_invalid_solver_options_name_the_option(comm):
    options = weft.Options().forward(weft.MgritOptions().max_levels(0))
    message = raised(comm, weft.InvalidOption, lambda: Net().parallel(comm, options))
    assert "max_levels" in message or "levels" in message


def test_an_unknown_enum_value_names_the_accepted_ones(comm):
    with pytest.raises(weft.InvalidOption, match="accepted: v, f"):
        weft.MgritOptions().cycle("w")


def test_a_step_that_changes_the_state_shape_is_bad_data(comm):
    net = Net()
    wrong = lambda n: torch.nn.Linear(6, 5 if n == net.steps - 1 else 6).double()  # noqa: E731
    model = weft.LayerParallel(comm, net.steps, 1.0, wrong)
    x = torch.randn(2, 6, dtype=torch.float64)
    message = raised(comm, weft.Error, lambda: model(x if model.owns_input else None))
    assert "shape" in message


class Raising(torch.nn.Module):
    """Raises ValueError on its `fail_at`-th call (1-based)."""

    def __init__(self, fail_at):
        super().__init__()
        self.linear = torch.nn.Linear(6, 6).double()
        self.calls, self.fail_at = 0, fail_at

    def forward(self, x):
        self.calls += 1
        if self.calls >= self.fail_at:
            raise ValueError("boom in the step")
        return torch.tanh(self.linear(x))


@pytest.mark.parametrize("fail_at", [1, 3], ids=["first-call", "later-batch"])
def test_a_python_exception_inside_a_step_is_a_step_error_everywhere(comm, fail_at):
    net = Net(script=False)
    last = net.steps - 1  # lives on the last rank only
    step = lambda n: Raising(fail_at) if n == last else net.step(n)  # noqa: E731
    model = weft.LayerParallel(comm, net.steps, 1.0, step)
    x = torch.randn(2, 6, dtype=torch.float64)

    def train_batches():
        for _ in range(4):
            out = model(x if model.owns_input else None)
            model.loss(out, lambda o: o.square().sum()).backward()

    message = raised(comm, weft.StepError, train_batches)
    assert "boom in the step" in message and f"step layer {last}" in message
    # The module keeps working after the failure once the layer behaves.
    model2 = weft.LayerParallel(comm, net.steps, 1.0, net.step)
    model2(x if model2.owns_input else None)


def test_a_failing_factory_is_a_step_error_naming_the_layer(comm):
    net = Net()

    def step(n):
        if n == 1:
            raise RuntimeError("no layer one")
        return net.step(n)

    message = raised(comm, weft.StepError, lambda: weft.LayerParallel(comm, net.steps, 1.0, step))
    assert "step layer 1" in message and "no layer one" in message


def test_a_factory_returning_something_else_names_the_type(comm):
    net = Net()
    message = raised(comm, weft.StepError,
                     lambda: weft.LayerParallel(comm, net.steps, 1.0, lambda n: 3))
    assert "int" in message and "torch.nn.Module" in message


def test_a_criterion_that_raises_is_bad_data_everywhere(comm):
    model = Net().parallel(comm)
    x = torch.randn(2, 5, dtype=torch.float64)
    out = model(x if model.owns_input else None)

    def criterion(logits):
        raise KeyError("no labels")

    message = raised(comm, weft.BadData, lambda: model.loss(out, criterion))
    assert "no labels" in message


def test_an_input_with_nan_is_bad_data_everywhere(comm):
    model = Net().parallel(comm)
    x = torch.full((2, 5), float("nan"), dtype=torch.float64)
    message = raised(comm, weft.BadData, lambda: model(x if model.owns_input else None))
    assert "NaN" in message


def test_a_backward_of_an_old_forward_is_an_invalid_option(comm):
    model = Net().parallel(comm)
    x = torch.randn(2, 5, dtype=torch.float64)
    first = model.loss(model(x if model.owns_input else None), lambda o: o.sum())
    model.loss(model(x if model.owns_input else None), lambda o: o.sum())
    with pytest.raises(RuntimeError, match="stale"):
        first.backward()


def test_an_input_that_is_not_a_tensor_is_a_type_error_everywhere(comm):
    model = Net().parallel(comm)
    message = raised(comm, TypeError, lambda: model([[1.0] * 5] * 2))
    assert "the input is a list" in message


def test_a_loss_without_the_placeholder_fails_everywhere(comm):
    model = Net().parallel(comm)
    x = torch.randn(2, 5, dtype=torch.float64)
    out = model(x if model.owns_input else None)
    if comm.size == 1:
        out = "logits"  # the output rank itself passes no tensor
    elif not model.owns_output:
        out = None
    message = raised(comm, (TypeError, weft.Error), lambda: model.loss(out, lambda o: o.sum()))
    assert "placeholder" in message or "not a torch.Tensor" in message


def test_a_step_failing_during_backward_is_a_step_error_at_the_next_call(comm):
    net = Net(script=False)
    last = net.steps - 1
    # Calls: the layer check, the forward solve, then the adjoint's recomputation (no cache).
    step = lambda n: Raising(3) if n == last else net.step(n)  # noqa: E731
    model = weft.LayerParallel(comm, net.steps, 1.0, step,
                               options=weft.Options.exact().cache_graphs(False))
    x = torch.randn(2, 6, dtype=torch.float64)
    out = model(x if model.owns_input else None)
    model.loss(out, lambda o: o.square().sum()).backward()  # completes on every rank
    if model.first_layer <= last < model.end_layer:  # the failure was in the adjoint
        grad = dict(model.named_parameters())[f"step_{last}.linear.weight"].grad
        assert not torch.isfinite(grad).all()
    message = raised(comm, weft.StepError, lambda: model(x if model.owns_input else None))
    assert "boom in the step" in message


def test_keep_freed_memory_says_what_it_did(monkeypatch):
    monkeypatch.setenv("WEFT_KEEP_FREED_MEMORY", "0")
    assert weft.keep_freed_memory() == "allocator: glibc defaults (WEFT_KEEP_FREED_MEMORY=0)"
    monkeypatch.delenv("WEFT_KEEP_FREED_MEMORY")
    assert weft.keep_freed_memory().startswith("allocator: freed memory kept")
