"""weft.Trainer: the C++ Trainer from Python, with the zoo's models or a network of Python
layers, observers written in Python, and its errors on every rank."""
import math
import pathlib
import tempfile

import pytest
import torch
import torch.nn.functional as F

import weft
import weft.data
from conftest import Net, same_everywhere


def bands(count, seed):
    """8x8 images whose label (0..2) is the brightest of three bands of rows."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(count, 1, 8, 8, generator=g)
    y = torch.randint(0, 3, (count,), generator=g)
    for i in range(count):
        x[i, 0, 3 * y[i]:3 * y[i] + 2] += 1.0
    return x, y


class Log:
    def __init__(self):
        self.events, self.epochs = [], []

    def run_started(self, d):
        self.events.append("run")

    def batch_done(self, d):
        self.events.append("batch")

    def epoch_done(self, d):
        self.events.append("done")
        self.epochs.append(d)


SMALL = dict(kind="resnet", channels=2, steps=6)


def test_the_zoos_model_trains_exactly_like_the_sequential_reference(comm):
    logs = []
    for serial in (False, True):
        log = Log()
        trainer = weft.Trainer(comm, bands(64, 1), bands(32, 2), model=SMALL, batch=16, epochs=2,
                               lr=1e-2, threads=1, serial=serial, observers=[log])
        trainer.fit()
        logs.append(log)
    parallel, serial = logs
    assert parallel.events == ["run"] + (["batch"] * 4 + ["done"]) * 2
    if comm.rank == 0:
        for p, s in zip(parallel.epochs, serial.epochs):
            assert p["train_loss"] == pytest.approx(s["train_loss"], rel=1e-4)
            assert p["test_loss"] == pytest.approx(s["test_loss"], rel=1e-4)
        assert parallel.epochs[1]["test_accuracy"] > 0.6
    else:
        assert serial.events == []  # serial: rank 0 trains alone


def test_a_network_of_python_layers_matches_a_plain_pytorch_loop(comm):
    """One batch per epoch (the whole set), so the Trainer's shuffle cannot change the loss."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(24, 5, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (24,), generator=g)
    net = Net()
    log = Log()
    trainer = weft.Trainer(comm, (x, y), (x, y), optimizer="sgd", lr=0.1, momentum=0.0, batch=24,
                           epochs=3, threads=1, observers=[log],
                           network=dict(steps=net.steps, t_final=net.t_final, step=net.step,
                                        open=net.open, close=net.close))
    trainer.fit()
    assert trainer.options.model.kind == "custom"
    reference = net.sequential()
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for epoch in range(3):
        optimizer.zero_grad()
        loss = F.cross_entropy(reference(x), y)
        loss.backward()
        optimizer.step()
        assert log.epochs[epoch]["train_loss"] == pytest.approx(loss.item(), rel=1e-10)


def test_an_observer_that_raises_on_one_rank_ends_every_rank(comm):
    class Failing:
        def epoch_done(self, d):
            if d["rank"] == 0:
                raise ValueError("the dashboard is down")

    trainer = weft.Trainer(comm, bands(32, 1), bands(16, 2), model=SMALL, batch=16, epochs=1,
                           threads=1, observers=[Failing()])
    with pytest.raises(weft.Error) as info:
        trainer.fit()
    message = str(info.value)
    assert "epoch_done raised ValueError: the dashboard is down" in message
    assert same_everywhere(comm, message)


def test_a_failing_python_layer_is_a_step_error_everywhere(comm):
    class Broken(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(6, 6).double()

        def forward(self, x):
            raise RuntimeError("layer exploded")

    net = Net(script=False)
    trainer = weft.Trainer(comm, (torch.randn(8, 5, dtype=torch.float64), torch.zeros(8).long()),
                           (torch.randn(8, 5, dtype=torch.float64), torch.zeros(8).long()),
                           batch=8, epochs=1, threads=1,
                           network=dict(steps=6, t_final=1.0, step=lambda n: Broken(),
                                        open=net.open, close=net.close))
    with pytest.raises(weft.StepError) as info:
        trainer.fit()
    assert "layer exploded" in str(info.value)
    assert same_everywhere(comm, str(info.value))


class Started(Log):
    def run_started(self, d):
        super().run_started(d)
        self.started = d


def test_layers_placed_by_cost_train_like_equal_numbers(comm):
    logs = []
    for balance in (False, True):
        log = Started()
        weft.Trainer(comm, bands(64, 1), bands(32, 2), model=SMALL, batch=16, epochs=1, lr=1e-2,
                     threads=1, balance_cost=balance, observers=[log]).fit()
        logs.append(log)
    equal, by_cost = logs
    for log in logs:
        assert len(log.started["layers_per_rank"]) == comm.size
        assert sum(log.started["layers_per_rank"]) == SMALL["steps"]
    assert equal.started["cost_per_rank"] == []
    if comm.size > 1:  # one rank has nothing to place
        assert len(by_cost.started["cost_per_rank"]) == comm.size
        assert min(by_cost.started["cost_per_rank"]) > 0
    for e, b in zip(equal.epochs, by_cost.epochs):
        assert b["train_loss"] == pytest.approx(e["train_loss"], rel=1e-9)
        assert b["test_loss"] == pytest.approx(e["test_loss"], rel=1e-9)
    with pytest.raises(weft.InvalidOption, match="balance_cost"):
        weft.Trainer(comm, bands(8, 1), bands(8, 2), model=SMALL, serial=True, balance_cost=True)


def test_evaluation_reports_the_exact_forward_and_the_solves_beside_it(comm):
    figures = {}
    for forward in ("both", "solver"):
        log = Log()
        weft.Trainer(comm, bands(64, 1), bands(40, 2), model=SMALL, batch=16, epochs=1, lr=1e-2,
                     threads=1, parallel=weft.Options.multilevel(2, 2, 1, 1),
                     evaluation_forward=forward, observers=[log]).fit()
        figures[forward] = log.epochs[0]
    both, solver = figures["both"], figures["solver"]
    assert both["eval_forward"] == "both" and solver["eval_forward"] == "solver"
    assert both["train_loss"] == pytest.approx(solver["train_loss"], rel=1e-6)
    assert both["mgrit_test_loss"] == pytest.approx(solver["test_loss"], rel=1e-6)
    assert "mgrit_test_loss" not in solver
    # The one-iteration solve is not the network's forward: the exact figures differ.
    assert abs(both["test_loss"] - solver["test_loss"]) > 1e-5 * abs(solver["test_loss"])
    with pytest.raises(weft.InvalidOption, match="evaluation_forward"):
        weft.Trainer(comm, bands(8, 1), bands(8, 2), model=SMALL, evaluation_forward="fast")


def test_bad_options_and_divergence(comm):
    with pytest.raises(TypeError, match="unknown option 'learning_rate'"):
        weft.Trainer(comm, bands(8, 1), bands(8, 2), model=SMALL, learning_rate=1.0)
    with pytest.raises(weft.InvalidOption, match="optimizer"):
        weft.Trainer(comm, bands(8, 1), bands(8, 2), model=SMALL, optimizer="rmsprop")
    trainer = weft.Trainer(comm, bands(64, 1), bands(32, 2), model=SMALL, optimizer="sgd",
                           lr=1e8, batch=16, epochs=1, threads=1)
    with pytest.raises(weft.Divergence, match="training diverged"):
        trainer.fit()


def test_data_comes_from_the_cpp_reader(comm):
    folder = weft.data.FASHION_MNIST
    images, labels = weft.data.load_split(folder, "test", 50)
    assert images.dtype == torch.uint8 and tuple(images.shape) == (50, 1, 28, 28)
    assert labels.dtype == torch.int64 and int(labels.max()) < 10
    mean, std = weft.data.normalization(images)
    x = images.to(torch.float64) / 255
    assert mean == pytest.approx(x.mean().item(), rel=1e-12)
    assert std == pytest.approx(math.sqrt((x * x).mean().item() - mean * mean), rel=1e-9)
    with pytest.raises(weft.BadData):
        weft.data.load_split("/nonexistent", "train", 5)


class Depths:
    def __init__(self):
        self.refined, self.depths = [], []

    def depth_refined(self, d):
        self.refined.append((d["epoch"], d["from_steps"], d["to_steps"]))

    def epoch_done(self, d):
        self.depths.append(d["depth"])


def test_nested_iteration_grows_the_depth_like_the_sequential_reference(comm):
    tmp_path_shared = pathlib.Path(comm.bcast(tempfile.mkdtemp() if comm.rank == 0 else None))
    runs = []
    for serial in (False, True):
        log = Depths()
        trainer = weft.Trainer(comm, bands(64, 1), bands(32, 2),
                               model=dict(kind="resnet", channels=2, steps=12), batch=16,
                               epochs=3, lr=1e-2, threads=1, serial=serial, observers=[log],
                               growth=dict(factor=2, refinements=2, epochs=[1, 1],
                                           interpolation="linear"),
                               checkpoint_dir=str(tmp_path_shared / f"grow{int(serial)}"))
        trainer.fit()
        runs.append(log)
    if comm.rank == 0:
        for log in runs:
            assert log.refined == [(2, 3, 6), (3, 6, 12)]
            assert log.depths == [3, 6, 12]
        info = weft.checkpoint_info(str(tmp_path_shared / "grow0"))
        assert info["growth"].refinements == 2
        assert info["growth"].interpolation == "linear"
        assert info["growth_level"] == 2
        assert info["model"].steps == 12
    with pytest.raises(weft.InvalidOption, match="grow_factor"):
        weft.Trainer(comm, bands(8, 1), bands(8, 2), model=dict(kind="resnet", steps=12),
                     growth=dict(factor=5, refinements=1))
    with pytest.raises(TypeError, match="unknown growth field"):
        weft.Trainer(comm, bands(8, 1), bands(8, 2), growth=dict(levels=2))


def test_mgopt_trains_like_the_sequential_reference_and_reports_its_corrections(comm):
    runs = []
    checkpoint = comm.bcast(tempfile.mkdtemp() if comm.rank == 0 else None) + "/mgopt"
    for serial in (False, True):
        log = Log()
        trainer = weft.Trainer(comm, bands(64, 1), bands(32, 2),
                               model=dict(kind="resnet", channels=2, steps=12), batch=64,
                               epochs=3, optimizer="sgd", momentum=0.0, lr=0.05, threads=1,
                               serial=serial, observers=[log],
                               mgopt=dict(levels=3, restriction="averaging"),
                               checkpoint_dir="" if serial else checkpoint)
        trainer.fit()
        runs.append(log)
    if comm.rank == 0:
        parallel, serial = runs
        losses = [e["train_loss"] for e in parallel.epochs]
        assert losses[2] < losses[1] < losses[0]  # one full-batch V-cycle per epoch
        for a, b in zip(parallel.epochs, serial.epochs):
            assert a["mgopt_levels"] == 3 and a["mgopt_corrections"] == 2
            assert abs(a["train_loss"] - b["train_loss"]) <= 1e-4 * abs(b["train_loss"])
        info = weft.checkpoint_info(checkpoint)
        assert info["mgopt"].levels == 3 and info["mgopt"].restriction == "averaging"
        assert info["optimizer"] == "sgd"
    # The checkpoint's optimizer state continues only its own kind.
    with pytest.raises(weft.InvalidOption, match="optimizer"):
        weft.Trainer(comm, bands(64, 1), bands(32, 2), epochs=4, optimizer="adam",
                     resume_dir=checkpoint)
    with pytest.raises(weft.InvalidOption, match="mgopt_levels"):
        weft.Trainer(comm, bands(8, 1), bands(8, 2), model=dict(kind="resnet", steps=6),
                     mgopt=dict(levels=3))
    with pytest.raises(weft.InvalidOption, match="restriction"):
        weft.MGOpt().restriction = "cubic"
    with pytest.raises(TypeError, match="unknown mgopt field"):
        weft.Trainer(comm, bands(8, 1), bands(8, 2), mgopt=dict(depth=2))


def test_iterations_chosen_by_the_training_are_checked_and_reported(comm):
    log = Log()
    trainer = weft.Trainer(comm, bands(64, 1), bands(32, 2),
                           model=dict(kind="resnet", channels=2, steps=8), batch=16, epochs=1,
                           lr=1e-2, threads=1, observers=[log],
                           parallel=weft.Options.multilevel(2, 2, 1, 1),
                           iterations=dict(forward=True, backward=True, check_every=2,
                                           max_iterations=3, forward_tolerance=0.2,
                                           half_steps=False))
    trainer.fit()
    (epoch,) = log.epochs
    assert epoch["gradient_checks"] >= 2
    assert 0 <= epoch["gradient_error"] < 1
    assert epoch["fwd_iterations_max"] <= 3 and epoch["bwd_iterations_max"] <= 3
    assert epoch["fallbacks"] >= 0 and epoch["step_evaluations"] > 0
    assert same_everywhere(comm, epoch["gradient_error"])
    assert 0 <= epoch["forward_error"] < 1  # the MGRIT logits against the network's own
    assert same_everywhere(comm, epoch["forward_error"])
    assert epoch["gradient_error_layers"] >= 0  # the steps' parameters alone
    assert same_everywhere(comm, epoch["gradient_error_layers"])
    assert "fwd_unskipped_fraction" not in epoch  # whole iterations, as asked
    assert "gradient_noise" not in epoch  # no diagnostics (the default)
    # The solves skip (the default): half steps (the default), whose share of batches is
    # reported; with the checks' diagnostics, the sampling noise and the error's persistence.
    half = Log()
    weft.Trainer(comm, bands(64, 1), bands(32, 2), model=dict(kind="resnet", channels=2, steps=8),
                 batch=16, epochs=1, lr=1e-2, threads=1, observers=[half],
                 parallel=weft.Options.multilevel(2, 2, 1, 1),
                 iterations=dict(forward=True, backward=True, check_every=2, max_iterations=3,
                                 diagnostics=True)).fit()
    assert 0 <= half.epochs[0]["fwd_unskipped_fraction"] <= 1
    assert 0 <= half.epochs[0]["bwd_unskipped_fraction"] <= 1
    assert half.epochs[0]["gradient_noise"] > 0
    assert same_everywhere(comm, half.epochs[0]["gradient_noise"])
    persistence = half.epochs[0]["gradient_error_persistence"]  # None: no two checks alike
    assert persistence is None or -1 <= persistence <= 1
    with pytest.raises(weft.InvalidOption, match="iteration_control"):
        weft.Trainer(comm, bands(8, 1), bands(8, 2), iterations=dict(forward=True))  # exact mode
    with pytest.raises(weft.InvalidOption, match="forward tolerance 1.5 is invalid"):
        weft.Trainer(comm, bands(8, 1), bands(8, 2), parallel=weft.Options.multilevel(2, 2, 1, 1),
                     iterations=dict(forward=True, forward_tolerance=1.5))
