"""Options (PopTorch's words), optimizers, learning-rate schedules and outfeed queues."""
from __future__ import annotations

import collections
import ctypes as C
import enum
import os
import sys
import threading
import weakref
from typing import Any, Callable, Dict, Iterator, Optional, Sequence, Tuple, Union

from . import _capi
from ._capi import check, cstr, lib


class OutputMode(enum.IntEnum):
    """How an anchor returns the S samples of a run (docs/architecture.md#output-modes)."""
    Default = 0  # Final for training, All for inference
    Final = 1    # T: the last sample
    EveryN = 2   # [S/N, *T]: samples N-1, 2N-1, ...
    All = 3      # [S, *T]: every sample, in order
    Sum = 4      # T: the sum over the S samples


class Watch(enum.IntFlag):
    """What a watch computes (OR them together)."""
    STATS = 1      # count, mean, std, min, max, L2, zeros, NaN, Inf
    HISTOGRAM = 2  # log2-magnitude buckets + TensorBoard buckets
    RANGE = 4      # fp16/bf16/fp8 underflow and overflow fractions


ModeLike = Union["OutputMode", str, int]


def output_mode(mode: ModeLike) -> OutputMode:
    """An OutputMode from itself or a name the library parses
    ("all", "final", "every_n", "sum", "default", any case)."""
    if isinstance(mode, OutputMode):
        return mode
    if isinstance(mode, str):
        out = C.c_int()
        check(lib.ts_output_mode_parse(cstr(mode), C.byref(out)))
        return OutputMode(out.value)
    return OutputMode(mode)


def _watch_what(what):
    if isinstance(what, str):
        flags = Watch(0)
        for part in what.replace(",", "|").split("|"):
            try:
                flags |= Watch[part.strip().upper()]
            except KeyError:
                raise ValueError(f"watch {what!r}: combine 'stats', 'histogram' and 'range' "
                                 "(e.g. 'stats|histogram')") from None
        return int(flags)
    return int(what)



def _step_range(steps, what: str) -> Tuple[int, int]:
    """A step range as the library takes it: "A:B", "A:" (B = 0: to the
    end), "A" or (A, B), 1-based and inclusive; None: (1, 0), every step."""
    if steps is None:
        return 1, 0
    if isinstance(steps, str):
        a, sep, b = steps.partition(":")
        try:
            first, last = int(a), (int(b) if b else 0)
        except ValueError:
            raise ValueError(f"{what} steps must be 'A:B' (1-based, inclusive), got {steps!r}") from None
        return first, (last if sep else first)
    first, last = (int(v) for v in steps)
    return first, last

class Options:
    """A run's options. Every setter returns the options, so they chain:
    `ts.Options().device_iterations(4).gradient_accumulation(2)`."""

    def __init__(self) -> None:
        self._h = _capi.checked_handle(lib.ts_options_new(), "ts_options_new")
        self._queues = []  # queues fed by models of these options must outlive them
        self._said = {}  # what was set, for repr()
        self._break_on_nan = False
        self._capture = None  # how a torch module is captured (capture()); None: the PyTorch's best

    def _set(self, key, text):
        if key in ("anchor", "watch"):
            self._said.setdefault(key, []).append(text)
        else:
            self._said[key] = text
        return self

    def __repr__(self) -> str:
        plural = {"anchor": "anchors", "watch": "watches"}
        parts = [f"{plural.get(k, k)}={v!r}" for k, v in self._said.items()]
        return f"Options({', '.join(parts)})"

    def __del__(self):
        if getattr(self, "_h", None) and not sys.is_finalizing():
            lib.ts_options_free(self._h)
            self._h = None

    def device_iterations(self, d: int) -> Options:
        """D: optimizer steps (training) or batches (inference) per run."""
        check(lib.ts_options_set_device_iterations(self._h, int(d)))
        return self._set("device_iterations", int(d))

    def gradient_accumulation(self, a: int) -> Options:
        """A: micro-batches whose gradients are averaged before each step."""
        check(lib.ts_options_set_gradient_accumulation(self._h, int(a)))
        return self._set("gradient_accumulation", int(a))

    def output_mode(self, mode: ModeLike, period: int = 0) -> Options:
        """The mode of anchors that do not set their own (period for EveryN)."""
        m = output_mode(mode)
        check(lib.ts_options_set_output_mode(self._h, m, int(period)))
        return self._set("output_mode", m.name + (f":{period}" if period else ""))

    def anchor_tensor(self, name: Optional[str], tensor_name: Optional[str] = None,
                      mode: ModeLike = OutputMode.Default, period: int = 0) -> Options:
        """Anchors tensors so that `model.get_anchored_tensor` returns them
        after each run:

        - `anchor_tensor("Gradient___fc3.bias")`: one tensor, under its own name;
        - `anchor_tensor("Gradient___*", mode="all")`: a glob (*, ? or [)
          anchors every tensor it matches, each under its own name;
        - `anchor_tensor("g", "Gradient___fc3.bias")`: one tensor under the
          short name "g" (PopTorch's form).

        Names are checked at compile: one that matches nothing raises
        NotFoundError with the closest names (`model.get_tensor_names()`
        lists them all). `mode`: an OutputMode or "all", "final",
        "every_n" (with `period`), "sum"; the default follows
        Options.output_mode."""
        if tensor_name is None:  # one argument: the tensor name or glob
            name, tensor_name = None, name
        m = output_mode(mode)
        check(lib.ts_options_anchor(self._h, cstr(name), cstr(tensor_name), m, int(period)))
        shown = tensor_name if name is None else f"{name}={tensor_name}"
        return self._set("anchor", shown + ("" if m == OutputMode.Default else f":{m.name}"))

    def watch(self, pattern: str, what: Union[Watch, int, str] = "stats", period: int = 1) -> Options:
        """Summaries of every tensor whose name matches `pattern`, every
        `period` runs, read with `model.watches()`. A pattern with *, ? or [
        is a glob (`"fc1/*"`: every tensor of scope fc1); without, it is one
        exact name. A pattern that matches no tensor raises NotFoundError at
        compile, with the closest names. `what` is a Watch flag set or a
        string such as "stats|histogram"."""
        check(lib.ts_options_watch(self._h, cstr(pattern), _watch_what(what), int(period)))
        return self._set("watch", pattern)

    def watch_stability(self, pattern: str = "*", period: int = 1) -> Options:
        """Stability signals of every layer whose name matches `pattern` (a
        glob over layer names: "fc1", "blocks.*", "*"), every `period`
        runs, read with `model.watches()` as rows named
        "stability/<layer>/<signal>" whose "mean" is the value: rms and
        max_abs of each layer's output, max_logit.h<k> of each attention
        head, lse of the logits, and per parameter grad_norm, update_ratio
        (||w_after - w_before|| / ||w_before||) and, for Adam,
        adam_update_norm (||m^/(sqrt(v^)+eps)||)."""
        check(lib.ts_options_watch_stability(self._h, cstr(pattern), int(period)))
        return self._set("watch", f"stability:{pattern}")

    def outfeed(self, queue: OutfeedQueue, pre_accumulated: bool = False) -> Options:
        """Streams every parameter gradient into `queue` as `<param>_grad`:
        per micro-batch before accumulation (pre_accumulated=True) or once
        per optimizer step."""
        check(lib.ts_options_outfeed_gradients(self._h, queue._h, int(bool(pre_accumulated))))
        self._queues.append(queue)
        return self._set("outfeed", queue.name)

    def check_numerics(self, mode: str) -> Options:
        """"off", "output" (each layer output and its gradient) or "op" (every op)."""
        code = C.c_int()
        check(lib.ts_check_numerics_parse(cstr(mode), C.byref(code)))
        check(lib.ts_options_set_check_numerics(self._h, code.value))
        return self._set("check_numerics", mode)

    def detect_spikes(self, k: float = 12.0, window: int = 32, action: str = "continue",
                      npz: Union[str, os.PathLike, None] = None) -> Options:
        """The spike detector (docs/observation.md#spikes): before each
        optimizer step's update, the loss and every watched tensor's RMS,
        max |x| (values) or L2 norm (gradients) against its own running
        median and MAD over the last `window` steps; a robust z-score of at
        least `k` is a spike, named by the signal that crossed first in the
        step's order (Model.spike()). `action`: "continue" (train on),
        "skip" (the step's update is skipped: weights and optimizer state
        untouched), "stop" (SpikeError before the update), "npz" (every call
        held; at a spike the step's tensors are written to `npz`, then
        SpikeError), "inspect" (every call held; SpikeError, the step's
        tensors in Model.inspect()). It watches every tensor's stats, every
        call. k=0 turns it off."""
        code = C.c_int()
        check(lib.ts_spike_action_parse(cstr(action), C.byref(code)))
        path = os.fspath(npz) if npz is not None else None
        check(lib.ts_options_detect_spikes(self._h, float(k), int(window), code.value, cstr(path) if path is not None else None))
        return self._set("detect_spikes", f"k={k:g}, window={int(window)}, action={action}" + (f", npz={path}" if path else ""))

    def break_on_nan(self, on: bool = True) -> Options:
        """With check_numerics on: when the check stops a call before any
        optimizer step of it, the call is run again with every tensor held
        (Model.hold), and the NumericsError it raises carries them:
        `e.tensors`, the Inspection of docs/inspector.md (also the local
        `tensors` of the frame that raised, for pdb.pm())."""
        self._break_on_nan = bool(on)
        return self._set("break_on_nan", bool(on))

    def trace(self, path: Union[str, os.PathLike, None],
              steps: Union[str, Tuple[int, int], None] = None) -> Options:
        """A timeline of the run (docs/trace.md): a Chrome/Perfetto trace
        (JSON) of optimizer steps `steps` ("A:B", (A, B), 1-based,
        inclusive; B = 0 or "A:" to the end; None: every step) written to
        `path` when step B ends, by Model.finish() or when the model is
        freed; a file that cannot be written is the error of that step or of
        finish(). None: off."""
        first, last = _step_range(steps, "trace")
        fn = _capi.function("ts_options_set_trace", "Options.trace")
        check(fn(self._h, cstr(os.fspath(path)) if path is not None else None, first, last))
        return self._set("trace", None if path is None else f"{os.fspath(path)}:{first}:{last or ''}")

    def dump_debug(self, directory: Union[str, os.PathLike, None],
                   steps: Union[str, Tuple[int, int], None] = None, ops: Optional[str] = None,
                   grads: bool = False, limit: Union[int, str] = "1G") -> Options:
        """The offline debugger dump (docs/formats.md#debugger-dump), as
        TensorFlow's enable_dump_debug_info: for each run in `steps` ("A:B",
        (A, B), 1-based, inclusive; "A:" to the end; None: every run), every
        op's output and, with `grads`, every gradient, as .npy files under
        `directory` listed in its index.tsv; `ops` a glob over tensor names
        or op types ("fc1*", "MatMul"). `limit` (bytes or "500M"; 0: none)
        bounds it: the first dumped run refuses to start when the planned
        size exceeds it. Read it back with ts.DebugDump(directory). None: off."""
        first, last = _step_range(steps, "dump_debug")
        if isinstance(limit, str):
            n = C.c_uint64()
            check(lib.ts_parse_size(cstr(limit), C.byref(n)))
            limit = n.value
        fn = _capi.function("ts_options_set_dump_debug", "Options.dump_debug")
        check(fn(self._h, cstr(os.fspath(directory)) if directory is not None else None, first, last,
                 cstr(ops) if ops is not None else None, int(bool(grads)), int(limit)))
        return self._set("dump_debug", None if directory is None else f"{os.fspath(directory)}:{first}:{last or ''}")

    def precision(self, dtype: str) -> Options:
        """Mixed precision as torch.autocast: "f32" (the default), "bf16" or
        "f16". The float inputs of every matmul, batched matmul and
        convolution become 16-bit copies named `<input>@bf16`, which those
        ops read, accumulating in f32; the rest, the master weights and the
        optimizer stay f32. "f16" turns on dynamic loss scaling."""
        from .graph import dtype_code
        check(lib.ts_options_set_precision(self._h, dtype_code(dtype)))
        return self._set("precision", dtype)

    def loss_scaling(self, enabled: Optional[bool] = True, init_scale: float = 65536.0,
                     growth: float = 2.0, backoff: float = 0.5,
                     growth_interval: int = 2000) -> Options:
        """Dynamic loss scaling as torch's GradScaler: a step whose gradients
        overflow is skipped and the scale multiplied by `backoff`; after
        `growth_interval` good steps it is multiplied by `growth`. enabled:
        True, False, or None (on for f16 precision only, the default)."""
        on = -1 if enabled is None else int(bool(enabled))
        check(lib.ts_options_set_loss_scaling(self._h, on, float(init_scale), float(growth),
                                              float(backoff), int(growth_interval)))
        return self._set("loss_scaling", (enabled, init_scale, growth, backoff, growth_interval))

    def threads(self, n: int) -> Options:
        """Worker threads for elementwise ops and reductions (0 = every core)."""
        check(lib.ts_options_set_threads(self._h, int(n)))
        return self._set("threads", int(n))

    def device(self, name: str) -> Options:
        """Where the model runs: "cpu" (the default), "cuda" (the first GPU)
        or "cuda:N" ("cpu-staged": the CPU's kernels run the way a GPU's
        are, to test the device path anywhere). Unset, the TS_DEVICE
        environment variable names it. A
        device this build or machine lacks fails when the model is made
        (UnsupportedError saying which: built without CUDA, no GPU)."""
        check(lib.ts_options_set_device(self._h, cstr(name)))
        return self._set("device", name)

    def allow_tf32(self, allow: bool = True) -> Options:
        """On a GPU, float32 products (matmuls, convolutions) may round their
        inputs to TF32 and run on tensor cores: faster, about 1e-3 relative
        error each (PyTorch's torch.backends.cuda.matmul.allow_tf32). Off by
        default; the CPU computes in float32 either way."""
        check(lib.ts_options_set_allow_tf32(self._h, int(bool(allow))))
        return self._set("allow_tf32", bool(allow))

    def log_layer_shapes(self, on: bool = True) -> Options:
        """After each run, one info log line with every layer's output shape
        ("step 3: layer output shapes: fc1/Add:0 f32[64,320], ..."), and at a
        recompilation the shapes it changed (RETURNN's
        debug_print_layer_output_shape; the CLI's --log-layer-shapes)."""
        check(_capi.function("ts_options_set_log_layer_shapes", "Options.log_layer_shapes")(self._h, int(bool(on))))
        return self._set("log_layer_shapes", bool(on))

    def on_start(self, fn: Callable[[Any], None]) -> Options:
        """A startup hook (RETURNN's startup_callback): fn(model) runs once,
        in the model's first call, after it is compiled for that call's
        inputs and before its first step -- a place for checks with the
        model in hand (get_tensor_names(), the graph's parameters). An
        exception it raises stops the call before any step and is raised
        from it; the next call runs the hook again. fn must not run the
        model."""
        def start(handle, _user):
            model = _capi.models_by_handle.get(handle)
            try:
                fn(model)
                return 0
            except BaseException as e:  # raised again by the model's call
                if model is not None:
                    model._start_error = e
                _capi.lib.ts_set_error(1, cstr(f"{type(e).__name__}: {e}"))  # TS_ERR_INVALID_ARGUMENT
                return 1
        self._start_fn = _capi.START_FN(start)  # the library holds it while the options or a model of them live
        check(_capi.function("ts_options_set_on_start", "Options.on_start")(self._h, self._start_fn, None))
        return self._set("on_start", getattr(fn, "__name__", repr(fn)))

    def capture(self, how: str) -> Options:
        """How a torch module is captured (ts.inference_model,
        ts.training_model): "export", torch.export decomposed to Core ATen
        and built op by op (PyTorch 2.5 or later; refused on an older one),
        the default where the PyTorch has it; "onnx", PyTorch's TorchScript
        ONNX exporter, every PyTorch from 1.13, the default on one older
        than 2.5. One log line says which capture ran."""
        if how not in ("onnx", "export"):
            raise ValueError(f"capture {how!r}: use 'onnx' (the TorchScript exporter) or "
                             "'export' (torch.export)")
        self._capture = how
        return self._set("capture", how)

    def replication(self, replicas: int, check_every: int = 100) -> Options:
        """R data-parallel replicas, one per rank of the MPI job (see
        tensorscope.dist_init): every rank passes the combined batch, each
        computes its slice, gradients are averaged before each step; anchors
        gain a replica axis after the sample axis."""
        check(lib.ts_options_set_replication(self._h, int(replicas), int(check_every)))
        return self._set("replication", int(replicas))

    def pipeline(self, stages: int, split_at: Sequence[str], schedule: str = "gpipe") -> Options:
        """A pipeline of `stages` stages, one per rank of the MPI job, split
        before the first op of each scope in split_at (stages - 1 names);
        schedule "gpipe" (every forward, then every backward) or "1f1b" (one
        forward, one backward: fewer micro-batches in flight)."""
        schedules = {"gpipe": 0, "1f1b": 1}
        if schedule not in schedules:
            raise ValueError(f"pipeline schedule {schedule!r}: use 'gpipe' or '1f1b'")
        names = [s.encode() for s in split_at]
        arr = (C.c_char_p * max(len(names), 1))(*names)
        check(lib.ts_options_set_pipeline(self._h, int(stages), arr, len(names)))
        if schedule != "gpipe":  # the default: no call a library without schedules would lack
            check(_capi.function("ts_options_set_pipeline_schedule", "Options.pipeline(schedule='1f1b')")(self._h, schedules[schedule]))
        return self._set("pipeline", f"{stages} stages at {','.join(split_at)} ({schedule})")


# ------------------------------------------------------------ optimizers

def _optimizer(base, **fields):
    """A ts_optimizer from the library's constructor, with the fields the
    caller named (None keeps the library's default, PyTorch's)."""
    for name, value in fields.items():
        if value is not None:
            setattr(base, name, value)
    return base


def SGD(lr: float, momentum: float = 0.0, weight_decay: float = 0.0, dampening: Optional[float] = None,
        nesterov: Optional[bool] = None) -> _capi.Optimizer:
    """Stochastic gradient descent with torch.optim.SGD's parameters (None: PyTorch's default)."""
    nesterov = None if nesterov is None else int(bool(nesterov))
    return _optimizer(lib.ts_sgd(lr, momentum, weight_decay), dampening=dampening,
                      nesterov=nesterov)


def Adam(lr: float = 1e-3, betas: Optional[Sequence[float]] = None, eps: Optional[float] = None,
         weight_decay: Optional[float] = None) -> _capi.Optimizer:
    """Adam with torch.optim.Adam's parameters (None: PyTorch's default)."""
    b1, b2 = betas if betas is not None else (None, None)
    return _optimizer(lib.ts_adam(lr), beta1=b1, beta2=b2, eps=eps, weight_decay=weight_decay)


def AdamW(lr: float = 1e-3, betas: Optional[Sequence[float]] = None, eps: Optional[float] = None,
          weight_decay: float = 0.01) -> _capi.Optimizer:
    """AdamW with torch.optim.AdamW's parameters (None: PyTorch's default)."""
    b1, b2 = betas if betas is not None else (None, None)
    return _optimizer(lib.ts_adamw(lr, weight_decay), beta1=b1, beta2=b2, eps=eps)


# --------------------------------------------------------------- learning-rate schedules

class LRSchedule:
    """The learning rate of every optimizer step t (0-based), as the CLI's
    `--lr-schedule`, `--warmup-steps`, `--lr-step-size`, `--lr-gamma` and
    `--lr-min` give it, from the optimizer's lr (the base rate):

    - a linear warmup over the first `warmup_steps` steps, lr * (t + 1) / W
      (PyTorch's LinearLR), then with u = t - W:
    - "constant": lr;
    - "step": lr * gamma ** (u // step_size) (StepLR);
    - "cosine": min_lr + (lr - min_lr) * (1 + cos(pi * min(u, T) / T)) / 2
      with T = `total_steps`, the steps after warmup (CosineAnnealingLR).
      The CLI takes T = epochs x runs per epoch x D - warmup.

    Give it to `ts.training_model(..., lr_schedule=...)` or
    `Model.set_lr_schedule`; the library checks the values then."""

    def __init__(self, kind: str = "constant", warmup_steps: int = 0, step_size: int = 1000,
                 gamma: float = 0.1, total_steps: int = 0, min_lr: float = 0.0) -> None:
        code = C.c_int()
        check(lib.ts_lr_schedule_parse(cstr(kind), C.byref(code)))
        self.kind = lib.ts_lr_schedule_name(code.value).decode()
        self.warmup_steps, self.step_size, self.gamma = int(warmup_steps), int(step_size), float(gamma)
        self.total_steps, self.min_lr = int(total_steps), float(min_lr)
        self._kind = code.value
        self._struct()  # an int the library's int64_t cannot hold is refused here, never wrapped

    def _struct(self) -> _capi.LrSchedule:
        return _capi.LrSchedule(self._kind, self.warmup_steps, self.step_size, self.gamma,
                                self.total_steps, self.min_lr)

    def lr_at(self, base_lr: float, step: int) -> float:
        """The rate of optimizer step `step` (0-based) from `base_lr`, as the library computes it."""
        return lib.ts_lr_at(C.byref(self._struct()), float(base_lr), int(step))

    def __repr__(self) -> str:
        args = [repr(self.kind)]
        if self.warmup_steps:
            args.append(f"warmup_steps={self.warmup_steps}")
        if self.kind == "step":
            args += [f"step_size={self.step_size}", f"gamma={self.gamma:g}"]
        if self.kind == "cosine":
            args += [f"total_steps={self.total_steps}", f"min_lr={self.min_lr:g}"]
        return f"LRSchedule({', '.join(args)})"


# --------------------------------------------------------------- outfeed

Record = collections.namedtuple("Record", "key run sample array replica stage", defaults=(0, 0))
Record.__doc__ = ("One outfeed record: run index, sample in the run, key, numpy array (a copy), "
                  "and the replica and pipeline stage (MPI rank) that made it; under mpirun rank 0 "
                  "also gets every other rank's records, after its own, after each run.")


class OutfeedQueue:
    """A named queue of records streamed while a model runs (docs/observation.md#outfeed-queues).

    mode "all" is lossless: a consumer thread of the library hands every
    record to this object as it is enqueued (a copy), so a run never waits on
    Python; `for rec in q:` yields them in order, each once. mode "last"
    keeps only the latest record per key; iterating takes what is there.
    `filters`: None = every key, [] = none, else globs (*, ?, [) or
    exact keys. `drop_when_full` drops (and counts) instead of waiting."""

    def __init__(self, name: str = "outfeed", mode: str = "all", depth: int = 64,
                 filters: Optional[Sequence[str]] = None, drop_when_full: bool = False) -> None:
        modes = {"all": 0, "last": 1}
        if mode not in modes:
            raise ValueError(f"outfeed mode {mode!r}: use 'all' or 'last'")
        self._mode = mode
        self._filters = [cstr(f) for f in filters] if filters is not None else None
        cfg = _capi.OutfeedConfig(cstr(name), modes[mode], int(depth), None, 0,
                                  int(bool(drop_when_full)))
        if self._filters is not None:
            cfg.filters = (C.c_char_p * max(len(self._filters), 1))(*self._filters)
            cfg.n_filters = len(self._filters)
        h = C.c_void_p()
        check(lib.ts_outfeed_new(C.byref(h), C.byref(cfg)))
        # freed when this object goes and no graph or model streams to it
        self._owned = _capi.Owned(h.value, lib.ts_outfeed_free)
        self._records = collections.deque()
        self._received = 0
        self._cond = threading.Condition()
        if mode == "all":
            me = weakref.ref(self)  # no cycle: the queue is freed when its last user goes

            def sink(_user, rec):
                q = me()
                if q is not None:
                    q._on_record(rec)

            self._owned.keep = _capi.SINK_FN(sink)  # called until the queue is freed
            check(lib.ts_outfeed_set_sink(self._h, self._owned.keep, None))

    def _on_record(self, rec):  # on the library's consumer thread
        r = rec.contents
        self._records.append(Record(r.key.decode(), r.run, r.sample,
                                    _capi.to_numpy(r.array, "outfeed record"), r.replica, r.stage))
        with self._cond:
            self._received += 1
            self._cond.notify_all()

    def _wait_delivered(self, timeout):
        """Runs are synchronous: once one returns, its records are enqueued;
        wait until the consumer thread has handed every one over."""
        with self._cond:
            ok = self._cond.wait_for(lambda: self._received >= self.counts()["enqueued"],
                                     timeout)
        if not ok:
            from .errors import StateError
            raise StateError(f"outfeed '{self.name}': {self.counts()['enqueued']} records "
                             f"enqueued but {self._received} delivered after {timeout} s")

    def __repr__(self) -> str:
        c = self.counts()
        return (f"<OutfeedQueue {self.name!r} mode={self._mode!r}: {c['enqueued']} records enqueued, "
                f"{c['dropped']} dropped>")

    def __iter__(self) -> Iterator[Record]:
        if self._mode == "all":
            self._wait_delivered(30.0)
            while self._records:
                yield self._records.popleft()
            return
        rec = _capi.OutfeedRecord()
        while True:
            st = lib.ts_outfeed_dequeue(self._h, C.byref(rec), 0)
            if st == _capi.TS_ERR_NOT_FOUND:  # nothing left
                return
            check(st)
            yield Record(rec.key.decode(), rec.run, rec.sample,
                         _capi.to_numpy(rec.array, "outfeed record"), rec.replica, rec.stage)

    def __len__(self) -> int:
        """Records waiting to be iterated (mode "all")."""
        if self._mode == "all":
            self._wait_delivered(30.0)
        return len(self._records)

    @property
    def name(self) -> str:
        """The queue's name."""
        return lib.ts_outfeed_name(self._h).decode()

    def accepts(self, key: str) -> bool:
        """Whether `key` passes the queue's filters."""
        return bool(lib.ts_outfeed_accepts(self._h, cstr(key)))

    def flush(self) -> None:
        """Mode "all": waits until the consumer thread has handed every
        record enqueued so far to this queue (iterating waits too). Mode
        "last" has no consumer thread: a StateError."""
        check(_capi.function("ts_outfeed_flush", "OutfeedQueue.flush")(self._h))

    def counts(self) -> Dict[str, int]:
        """{"enqueued", "dequeued", "dropped", "wait_ns"} so far."""
        return _capi.as_dict(lib.ts_outfeed_get_counts(self._h))

    @property
    def _h(self):
        return self._owned.ptr

    def __del__(self):
        # Freed (its consumer thread stopped) once nothing uses it: the graphs
        # and models it streams from pin it.
        _capi.release(self)
