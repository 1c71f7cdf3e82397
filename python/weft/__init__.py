"""weft: layer-parallel training of residual networks with MGRIT, from PyTorch.

    from mpi4py import MPI
    import torch, weft

    def step(n):                       # a factory: layer n of the N residual steps
        return torch.jit.script(Block())   # TorchScript: runs in C++ without the GIL
    model = weft.LayerParallel(MPI.COMM_WORLD, steps=32, t_final=1.0, step=step,
                               open=make_open, close=make_close,
                               options=weft.Options.multilevel(3, 4, 2, 1))
    optimizer = torch.optim.Adam(model.parameters())   # this rank's parameters
    for images, labels in batches:     # images are read on rank 0, labels on the last rank
        optimizer.zero_grad()
        out = model(images)            # logits on the last rank, a placeholder elsewhere
        loss = model.loss(out, lambda logits: F.cross_entropy(logits, labels))
        loss.backward()                # every rank: the adjoint MGRIT solve
        optimizer.step()

See docs/python.md. Every method that runs MPI is collective: call it on every rank of the
communicator in the same order. Errors arrive on every rank as the same weft.Error.
"""
from collections import OrderedDict

from mpi4py import MPI  # noqa: F401  (initialises MPI before the extension loads)
import collections

import torch

from ._weft import (  # noqa: F401
    BadData,
    DepthGrowth,
    Divergence,
    IterationControl,
    MGOpt,
    Error,
    InvalidOption,
    LayerParallelCore,
    MgritOptions,
    ModelConfig,
    MpiError,
    Options,
    RecurrentCore,
    StepError,
    TrainerCore,
    TrainerOptions,
    checkpoint_info,
    keep_freed_memory,
    layer_stream_seed,
    trace_batch_begin,
    trace_batch_end,
    trace_phase,
    trace_start,
    trace_stop,
    trace_write,
)

__all__ = [
    "Trainer", "TrainerOptions", "DepthGrowth", "IterationControl", "MGOpt", "ModelConfig", "checkpoint_info", "LayerParallel", "Recurrent", "SequentialNetwork", "Stage", "Options", "MgritOptions", "Error", "InvalidOption",
    "BadData", "Divergence", "MpiError", "StepError", "keep_freed_memory", "trace_start", "trace_batch", "trace_phase",
    "trace_batch_begin", "trace_batch_end", "trace_write", "trace_stop", "layer_stream_seed",
]


class trace_batch:
    """Marks one training batch for the timeline (weft.trace_start): `with weft.trace_batch(i): ...`.
    Wrap its forward, loss and backward, and optimizer step in `weft.trace_phase("forward")`,
    `("backward")` and `("optimizer")` so that `weft replay` splits the batch as for weft train."""

    def __init__(self, index):
        self.index = index

    def __enter__(self):
        trace_batch_begin(self.index)
        return self

    def __exit__(self, *exc):
        trace_batch_end(self.index)
        return False



def _check_factory(value, name, takes_index):
    if value is None:
        return None
    if isinstance(value, torch.nn.Module) or not callable(value):
        call = "step(n)" if takes_index else name + "()"
        raise TypeError(f"weft.LayerParallel: {name} must be a factory {call} that returns a "
                        f"new module each call, not a {type(value).__name__}")
    return value


class Stage(collections.namedtuple("Stage", "steps t_final step transition", defaults=(None,))):
    """One stage of a multi-stage network: `steps` residual steps x <- x + h step(n)(x) with
    h = t_final / steps, then (all stages but the last) x <- transition(n)(x), which may change
    the state's shape. Factories take the layer's index n along the whole chain."""


class SequentialNetwork(torch.nn.Module):
    """The whole network on one rank: open, x <- x + h_n * layer_n(x) (x <- layer_n(x) for a
    transition, h_n = 0), close.

    Parameter names match weft.LayerParallel's: "open.*", "step_<n>.*", "transition_<n>.*",
    "close.*". `step_size`: one h for every layer, or a list with one h per layer (0: transition).
    In training mode layer n draws its random numbers (dropout) from the default generator seeded
    with weft.layer_stream_seed(seed, batch_index, n), as weft.LayerParallel's layers do (the
    caller's generator state is restored after each layer), and every training-mode forward
    counts one batch: with the options' seed and the same batch index the two apply the same
    masks. `seed`: weft.Options.seed() of the layer-parallel network it stands for.
    """

    def __init__(self, steps, step_size, open=None, close=None, seed=0, batch_index=0):
        super().__init__()
        sizes = list(step_size) if isinstance(step_size, (list, tuple)) else None
        self.step_sizes = [float(h) for h in sizes] if sizes else [float(step_size)] * len(steps)
        self.step_size = self.step_sizes[0] if self.step_sizes else 0.0
        self.open = open
        self.close = close
        self.steps = len(steps)
        self.seed = int(seed)
        self.batch_index = int(batch_index)
        for n, module in enumerate(steps):
            self.add_module(self._name(n), module)

    def _name(self, n):
        return f"{'transition' if self.step_sizes[n] == 0.0 else 'step'}_{n}"

    def step(self, n):
        return getattr(self, self._name(n))

    def _streamed(self, layer, n, x):
        generator = (torch.default_generator if x.device.type == "cpu"
                     else torch.cuda.default_generators[x.device.index or 0])
        saved = generator.get_state()
        generator.manual_seed(layer_stream_seed(self.seed, self.batch_index, n))
        try:
            return layer(x)
        finally:
            generator.set_state(saved)

    def forward(self, x):
        training = self.training
        if self.open is not None:
            x = self.open(x)
        for n in range(self.steps):
            layer = self.step(n)
            y = self._streamed(layer, n, x) if training and layer.training else layer(x)
            h = self.step_sizes[n]
            x = y if h == 0.0 else x + h * y
        if training:
            self.batch_index += 1
        if self.close is not None:
            x = self.close(x)
        return x

    @classmethod
    def build(cls, steps, t_final, step, open=None, close=None, seed=0):
        """The sequential network from the same factories as weft.LayerParallel."""
        return cls([step(n) for n in range(steps)], t_final / steps,
                   open() if open is not None else None, close() if close is not None else None,
                   seed=seed)


class _CoreModule(torch.nn.Module):
    """What weft.LayerParallel and weft.Recurrent share: a C++ core (`self._core`) that holds
    the parameters (the same tensors the C++ side updates), converts dtypes and takes options."""

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        for name, tensor in self._core.named_parameters():
            yield (prefix + "." + name if prefix else name), tensor

    def parameters(self, recurse=True):
        for _, tensor in self.named_parameters():
            yield tensor

    def to(self, dtype):
        """Collective: converts the module (ghost copies included) to `dtype` (CPU only)."""
        self._core.to(dtype)
        return self

    def double(self):
        return self.to(torch.float64)

    def float(self):
        return self.to(torch.float32)

    def set_options(self, options):
        """Collective: new solver options."""
        self._core.set_options(options)

    @property
    def options(self):
        return self._core.options()


class LayerParallel(_CoreModule):
    """A residual network whose `steps` step layers are spread over the ranks of `comm`.

    x_0 = open(input) on rank 0; x_{n+1} = x_n + h step_n(x_n) with h = t_final / steps; the
    output close(x_N) on the last rank. Forward and backward are MGRIT solves (one level, the
    default `weft.Options.exact()`, equals ordinary backprop).

    comm: an mpi4py communicator. step: a factory step(n) -> module for 0 <= n < steps; open,
    close: factories () -> module (optional). A factory must return a new module each call with
    the same structure for the same n on every call and rank (weft builds ghost copies of remote
    layers and the gathered network with it). Modules may be TorchScript (torch.jit.script or
    trace: run in C++ without the GIL) or plain torch.nn.Modules (called under the GIL; slower).
    options: weft.Options (default exact mode).
    stages: instead of steps/t_final/step, a list of weft.Stage (multi-stage networks whose
    transitions change the state's shape; one MGRIT solve over the whole chain).
    data_comm: data x layer parallelism: `comm` holds this replica's ranks, `data_comm` the ranks
    with the same position in the other replicas (e.g. comm.Split(rank // per_replica) and
    comm.Split(rank % per_replica)); gradients are averaged over the replicas after backward.
    """

    def __init__(self, comm, steps=None, t_final=None, step=None, open=None, close=None,
                 options=None, *, stages=None, data_comm=None):
        super().__init__()
        if options is None:
            options = Options.exact()
        elif not isinstance(options, Options):
            raise TypeError(f"weft.LayerParallel: options must be weft.Options, not a "
                            f"{type(options).__name__}")
        if stages is not None:
            if steps is not None or step is not None:
                raise TypeError("weft.LayerParallel: give either steps, t_final and step, or "
                                "stages, not both")
            stages = [(int(st.steps), float(st.t_final), _check_factory(st.step, "step", True),
                       _check_factory(st.transition, "transition", True)) for st in stages]
            steps, t_final = 0, 1.0
        else:
            step = _check_factory(step, "step", True)
            if step is None:
                raise TypeError("weft.LayerParallel: step must be a factory step(n) -> module")
            if steps is None or t_final is None:
                raise TypeError("weft.LayerParallel: steps and t_final are required")
        self._core = LayerParallelCore(comm, int(steps), float(t_final), step,
                                       _check_factory(open, "open", False),
                                       _check_factory(close, "close", False), options,
                                       stages=stages, data_comm=data_comm)

    # --- the training loop ------------------------------------------------------------------
    def forward(self, input=None):
        """Collective. `input` is read on rank 0 only (others may pass None). Returns the
        output on the last rank and a 0-dim placeholder connected to autograd elsewhere."""
        return self._core.forward(input)

    def loss(self, output, criterion):
        """Collective. criterion(output) on the last rank (a scalar); on every rank a scalar
        with that value whose backward() runs this rank's part of the adjoint solve."""
        return self._core.loss(output, criterion)

    def broadcast_from_output(self, value):
        """Collective: `value` of the last rank, on every rank (metrics such as accuracy)."""
        return self._core.broadcast_from_output(float(value))

    # --- parameters: this rank's layers, the same tensors the C++ side updates ------------------
    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        for name, tensor in self._core.named_buffers():
            yield (prefix + "." + name if prefix else name), tensor

    def buffers(self, recurse=True):
        for _, tensor in self.named_buffers():
            yield tensor

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """This rank's parameters and buffers; names as in gather_sequential()'s state_dict."""
        out = OrderedDict() if destination is None else destination
        for name, tensor in list(self.named_parameters(prefix)) + list(self.named_buffers(prefix)):
            out[name] = tensor if keep_vars else tensor.detach()
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Copies the entries of `state_dict` that name this rank's tensors (a full network's
        state dict works on every rank). With strict, every local tensor must be present."""
        own = dict(self.named_parameters())
        own.update(self.named_buffers())
        missing = [name for name in own if name not in state_dict]
        if strict and missing:
            raise KeyError(f"weft.LayerParallel.load_state_dict: missing {', '.join(missing)}")
        with torch.no_grad():
            for name, tensor in own.items():
                if name in state_dict:
                    tensor.copy_(state_dict[name])

    def train(self, mode=True):
        self.training = bool(mode)
        self._core.train(bool(mode))
        return self

    # --- options, statistics, the whole network ---------------------------------------------
    def statistics(self):
        """The last batch on this rank: iterations, residuals, step counts, times (a dict)."""
        return self._core.statistics()

    def gather_sequential(self, root=0):
        """Collective: the whole network as a weft.SequentialNetwork on `root` (modules built by
        the factories, parameters copied), None on the other ranks."""
        parts = self._core.gather_sequential(root)
        if parts is None:
            return None
        open, steps, close, step_size = parts
        return SequentialNetwork(steps, step_size, open, close, seed=self.options.seed(),
                                 batch_index=self._core.batch_index).train(self.training)

    rank = property(lambda self: self._core.rank)
    ranks = property(lambda self: self._core.ranks)
    steps = property(lambda self: self._core.steps)
    batch_index = property(
        lambda self: self._core.batch_index,
        lambda self, index: setattr(self._core, "batch_index", int(index)),
        doc="The batch index of the next training-mode forward (the layers' random streams).")
    step_size = property(lambda self: self._core.step_size)
    owns_input = property(lambda self: self._core.owns_input)
    owns_output = property(lambda self: self._core.owns_output)
    first_layer = property(lambda self: self._core.first_layer)
    end_layer = property(lambda self: self._core.end_layer)
    ghost_layers = property(lambda self: self._core.ghost_layers)

    def extra_repr(self):
        return (f"steps={self.steps}, step_size={self.step_size:g}, rank={self.rank}/"
                f"{self.ranks}, layers=[{self.first_layer}, {self.end_layer})")


class Recurrent(_CoreModule):
    """A stacked GRU or LSTM (`cell` 'gru' or 'lstm') whose sequence steps are MGRIT time points
    over the ranks of `comm` (weft::nn::Recurrent, docs/training.md §7).

    Parameters have torch.nn.GRU/LSTM's names and layout and are replicated on every rank
    (created on rank 0, broadcast); each rank computes its chunk of the steps and gradients are
    summed over the ranks. forward(input [T, B, input_size], h0=None, c0=None) is collective and
    returns (output [T, B, H] or None, h_n [L, B, H], c_n [L, B, H] or None) on every rank;
    gradients reach input, h0, c0 and the parameters through autograd.

    Cell and coarse steps (weft::nn::RecurrentOptions): coarse_input 'start' (a coarse MGRIT step
    takes the input at its start) or 'mean' (the mean of the inputs of the steps it stands for);
    implicit_step 0 (torch's cell) or Δt > 0, the implicit cell: one backward-Euler step of
    ds/dt = cell(s, x) - s per sequence step, solved by implicit_iterations (>= 1) fixed-point
    iterations. Invalid values raise weft.InvalidOption (TypeError for a wrong type)."""

    def __init__(self, comm, cell, input_size, hidden_size, num_layers=1, output_sequence=False,
                 options=None, coarse_input="start", implicit_step=0.0, implicit_iterations=3):
        super().__init__()
        if options is None:
            options = Options.exact()
        elif not isinstance(options, Options):
            raise TypeError(f"weft.Recurrent: options must be weft.Options, not a "
                            f"{type(options).__name__}")
        if not isinstance(coarse_input, str):
            raise TypeError(f"weft.Recurrent: coarse_input must be 'start' or 'mean', not a "
                            f"{type(coarse_input).__name__}")
        if isinstance(implicit_step, bool) or not isinstance(implicit_step, (int, float)):
            raise TypeError(f"weft.Recurrent: implicit_step must be a number, not a "
                            f"{type(implicit_step).__name__}")
        if isinstance(implicit_iterations, bool) or not isinstance(implicit_iterations, int):
            raise TypeError(f"weft.Recurrent: implicit_iterations must be an int, not a "
                            f"{type(implicit_iterations).__name__}")
        self._core = RecurrentCore(comm, str(cell), int(input_size), int(hidden_size),
                                   int(num_layers), bool(output_sequence), options,
                                   coarse_input, float(implicit_step), implicit_iterations)

    def forward(self, input, h0=None, c0=None):
        return self._core.forward(input, h0, c0)

    def forward_local(self, local_input, h0=None, c0=None):
        """Collective, distributed mode: each rank passes only the rows of its own steps,
        local_input [local steps, B, input_size] = rows local_steps(T) of the sequence (T is the
        sum over the ranks; weft.BadData on every rank when a chunk is not its rank's share).
        Returns (this rank's rows of the output sequence or None, h_n, c_n or None); h_n and c_n
        are the same on every rank. Gradients: the loss is the sum over the ranks of each
        rank's terms in its output rows, plus the terms in h_n / c_n, which count once (compute
        them alike on every rank); the input gradient is the local rows'."""
        return self._core.forward(local_input, h0, c0, distributed=True)

    def local_steps(self, length):
        """The steps (first, end) this rank computes for a sequence of `length` steps."""
        return self._core.local_steps(int(length))


def _network_spec(network):
    """(steps, t_final, step, open, close, stages) of a network given as a dict with the keys
    weft.LayerParallel takes: steps, t_final and step, or stages; open and close."""
    if network is None:
        return None
    if not isinstance(network, dict):
        raise TypeError(f"weft.Trainer: network must be a dict (steps, t_final, step, open, "
                        f"close, or stages), not a {type(network).__name__}")
    unknown = set(network) - {"steps", "t_final", "step", "open", "close", "stages"}
    if unknown:
        raise TypeError(f"weft.Trainer: network has unknown keys {sorted(unknown)}")
    stages = network.get("stages")
    if stages is not None:
        stages = [(int(st.steps), float(st.t_final), _check_factory(st.step, "step", True),
                   _check_factory(st.transition, "transition", True)) for st in stages]
        steps, t_final, step = 0, 1.0, None
    else:
        step = _check_factory(network.get("step"), "step", True)
        if step is None or network.get("steps") is None or network.get("t_final") is None:
            raise TypeError("weft.Trainer: network needs steps, t_final and step (or stages)")
        steps, t_final = int(network["steps"]), float(network["t_final"])
    return (steps, t_final, step, _check_factory(network.get("open"), "open", False),
            _check_factory(network.get("close"), "close", False), stages)


class Trainer:
    """weft's training loop (the C++ weft::train::Trainer, the one `weft train` runs): epochs
    with the per-epoch shuffle, each replica's share of the global batch, the optimizer and its
    learning-rate schedule, evaluation with a confusion matrix after every epoch, crash-safe
    checkpoints and resume, divergence detection, a timeline.

        trainer = weft.Trainer(MPI.COMM_WORLD, train=(images, labels), test=(images, labels),
                               model=dict(kind="stages"), epochs=2, lr=3e-3,
                               lr_schedule="cosine", parallel=weft.Options.multilevel(2, 2, 1, 1))
        trainer.add_observer(MyLogger())   # methods epoch_done(d), batch_done(d), ...
        trainer.fit()

    train, test: (inputs [n, channels, rows, cols] float tensor, labels [n] int64), the same on
    every rank. model: a weft.ModelConfig or a dict of its fields (kind resnet, stages, conv3d,
    gru, lstm); or network: a dict with the keys weft.LayerParallel takes (steps, t_final, step,
    open, close, or stages) for a network of your own. normalization: (mean, std) stored in
    checkpoints. seed: the shuffles' seed (and the initialisation of the zoo's models; default 1).
    The other keywords are weft.TrainerOptions fields (batch, epochs, optimizer, lr,
    lr_schedule, momentum, threads, serial, data_ranks, balance_cost, parallel, eval_batch,
    evaluation_forward, checkpoint_dir, resume_dir, trace_path, trace_batches, growth).
    evaluation_forward: "exact" (the network's own forward, pipelined over the ranks; what
    serial training and weft eval report), "solver" (the training's MGRIT forward in evaluation
    mode) or "both" (the default: the exact figures, and the solver's as mgrit_test_loss and
    mgrit_test_accuracy, where the forward solve is multilevel). balance_cost=True places
    the layers over the ranks in blocks of equal measured cost instead of equal numbers. growth: nested iteration over depth, a
    weft.DepthGrowth or a dict of its fields (factor, refinements, epochs, interpolation): the
    model trains first with its steps divided by factor**refinements and is refined after each
    entry of epochs (docs/training.md). iterations: MGRIT iterations chosen by the training, a
    weft.IterationControl or a dict of its fields (forward, backward, min_iterations,
    max_iterations, gradient_tolerance, forward_tolerance, check_every, half_steps,
    diagnostics). mgopt: MG/Opt
    over depth, a weft.MGOpt or a dict of its fields (levels, factor, pre, post, coarse,
    line_search, restriction, interpolation): each batch one V-cycle over the model and its
    shallower versions.

    Observers: any objects with some of the methods run_started, epoch_started, batch_done,
    evaluation_done, epoch_done, checkpoint_written, trace_written, divergence, depth_refined;
    each is called
    with a dict of the event's figures on every rank that trains (d["rank"] says which; with
    serial=True rank 0 alone). What an observer raises ends the run on every rank as weft.Error.
    Every method is collective: call it on every rank of `comm`.
    """

    def __init__(self, comm, train, test, *, model=None, network=None, normalization=(0.0, 1.0),
                 observers=(), seed=None, **options):
        opts = TrainerOptions()
        for key, value in options.items():
            if not hasattr(opts, key) or key.startswith("_"):
                raise TypeError(f"weft.Trainer: unknown option '{key}'")
            kinds = {"growth": DepthGrowth, "iterations": IterationControl, "mgopt": MGOpt}
            if key in kinds and isinstance(value, dict):
                made = kinds[key]()
                for field, v in value.items():
                    if not hasattr(made, field) or field.startswith("_"):
                        raise TypeError(f"weft.Trainer: unknown {key} field '{field}'")
                    setattr(made, field, v)
                value = made
            setattr(opts, key, value)
        if model is not None and network is not None:
            raise TypeError("weft.Trainer: give model or network, not both")
        if isinstance(model, dict):
            config = ModelConfig()
            for key, value in model.items():
                if not hasattr(config, key) or key.startswith("_"):
                    raise TypeError(f"weft.Trainer: unknown model field '{key}'")
                setattr(config, key, value)
            model = config
        if model is not None:
            opts.model = model
        if seed is not None:  # the shuffles' seed (and the zoo model's initialisation)
            config = opts.model
            config.seed = int(seed)
            opts.model = config
        (train_x, train_y), (test_x, test_y) = train, test
        self._core = TrainerCore(comm, opts, train_x, train_y, test_x, test_y,
                                 (float(normalization[0]), float(normalization[1])),
                                 _network_spec(network))
        for observer in observers:
            self.add_observer(observer)

    def add_observer(self, observer):
        self._core.add_observer(observer)

    def fit(self):
        """Trains the epochs from start_epoch to options.epochs; collective."""
        self._core.fit()

    def evaluate(self, inputs, labels):
        """{"loss", "accuracy", "confusion"} of the model on (inputs, labels) in eval mode."""
        return self._core.evaluate(inputs, labels)

    def named_parameters(self):
        """(name, tensor) of this rank's part of the model."""
        return self._core.named_parameters()

    @property
    def options(self):
        return self._core.options()

    @property
    def start_epoch(self):
        return self._core.start_epoch()
