"""Training and inference models (PopTorch's training_model/inference_model).

Arrays: inputs are passed to the library without a copy when they are
C-contiguous and of the graph's dtype (numpy makes a contiguous copy
otherwise); everything returned (anchors, outfeed records, watches,
parameters' values) is a copy that stays valid after the next run. The only
zero-copy output is `Tensor.view()` of a parameter.

Ctrl-C during a call (a run) stops the run between micro-batches (as
Model.cancel does) and raises KeyboardInterrupt once it has stopped:
the weights are those of the completed steps, and the anchors hold the
completed samples (other rows NaN), see Model.cancel.
"""
from __future__ import annotations

import ctypes as C
import os
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from . import _capi
from ._capi import check, cstr, lib
from .errors import StateError, error_for, numerics_error
from .graph import Graph, Tensor
from .inspection import Inspection
from .observe import _summary_dict
from .options import LRSchedule, ModeLike, Options

TensorLike = Union[Tensor, str]


class Model:
    """A compiled-on-demand model of a graph. Call it with numpy arrays, one
    per graph input (positionally in the graph's input order, or by name):
    each holds D x A micro-batches stacked on axis 0 (x of declared shape
    [B, ...] is passed as [D * A * B, ...])."""

    def __init__(self, graph: Graph, options: Options, handle: int, training: bool,
                 returns: List[str]) -> None:
        self.graph = graph      # parameters live in the graph
        self.options = options  # and queues in the options
        # the library's model points into its graph and its options' queues
        self._owned = _capi.Owned(handle, lib.ts_model_free,
                                  [graph._owned] + [q._owned for q in options._queues])
        self._closed = False
        self.training = training
        self._returns = returns  # anchor names a call returns
        self._lock = threading.RLock()  # one call into the model at a time
        self._cancel_lock = threading.Lock()  # cancel() against close()
        self._compiled = False  # compile() checked the watches
        self._schedule = None  # the LRSchedule set, for repr
        graph._models.add(self)
        self._start_error = None  # what an on_start hook raised
        _capi.models_by_handle[handle] = self

    def __repr__(self) -> str:
        if self._closed:
            return f"<{type(self).__name__} (closed)>"
        kind = "training" if self.training else "inference"
        what = f"loss {self._returns[-1]!r}" if self.training else f"outputs {self._returns}"
        state = f"{self.runs} runs, {self.steps} steps" if self._compiled else "not compiled"
        lr = f", lr={self.learning_rate:.6g}" if self.training else ""
        sched = f", {self._schedule!r}" if self._schedule else ""
        return f"<{type(self).__name__} {kind} of {what}, {state}{lr}{sched}, {self.options!r}>"

    @property
    def _h(self):
        if self._closed:
            raise StateError("the model was closed (or its graph was): make a new one")
        return self._owned.ptr

    def close(self) -> None:
        """Frees the model now (after a call in progress on another thread
        returns); using it afterwards is a StateError."""
        with self._lock, self._cancel_lock:
            if not self._closed:
                self._closed = True
                self._owned.release()

    def __del__(self):
        if not getattr(self, "_closed", True) and not sys.is_finalizing():
            self.close()

    def cancel(self) -> None:
        """Asks the call in progress (on another thread) to stop before its
        next micro-batch (under MPI: its next step, on every rank); that call
        then raises CancelledError, keeping what it computed (the weights of
        completed steps, outfeed records, anchors' completed rows, other rows
        NaN). No effect when no call is in progress. Ctrl-C does this for a
        call on the main thread and raises KeyboardInterrupt."""
        with self._cancel_lock:
            if not self._closed:
                lib.ts_model_cancel(self._owned.ptr)

    # ---- life cycle
    def finish(self) -> None:
        """Writes what the model still holds for a file of its own: a trace
        whose step range is open or not reached yet (Options.trace) is
        written now, and nothing more is traced. Its error is raised here (a
        full disk: FileError), where closing the model could only log it.
        The model stays usable."""
        fn = _capi.function("ts_model_finish", "Model.finish")
        with self._lock:
            check(fn(self._h))

    def compile(self, *inputs: np.ndarray, **named_inputs: np.ndarray) -> Model:
        """Validates, infers shapes, orders ops and plans memory (the first
        call does it when compile was not called). Inputs, when given, are
        checked to match the graph's inputs by name and dtype (their batch
        size is taken at the first run). An anchor or watch that matches no
        tensor raises NotFoundError naming the closest names."""
        with self._lock:
            check(lib.ts_model_compile(self._h))
            check_watches = getattr(lib, "ts_model_check_watches", None)  # absent from older libraries
            if check_watches is not None:
                check(check_watches(self._h))
            self._compiled = True
        if inputs or named_inputs:
            for name, (arr, _) in self._arrays(inputs, named_inputs).items():
                declared = self.graph.tensor(name).dtype
                half_for_f32 = declared == np.float32 and arr.dtype in (_capi.TS_BF16, _capi.TS_F16)  # read exactly
                if _capi.DTYPES[arr.dtype] != declared and not half_for_f32:
                    raise TypeError(f"input '{name}' is {_capi.DTYPES[arr.dtype]} but the graph "
                                    f"declares {declared}")
        return self

    def _arrays(self, inputs, named):
        names = [t.name for t in self.graph.inputs]
        if len(inputs) > len(names):
            raise TypeError(f"{len(inputs)} inputs given; the graph has {len(names)}: "
                            f"{', '.join(names)}")
        given = dict(zip(names, inputs))
        for k, v in named.items():
            if k in given:
                raise TypeError(f"input '{k}' given twice")
            given[k] = v
        return {k: _capi.to_c(v, k) for k, v in given.items()}

    def __call__(self, *inputs: np.ndarray, **named_inputs: np.ndarray) -> Any:
        """One run. Returns copies of the loss (training, as its anchor
        returns it: by default the last micro-batch's) or of the outputs
        (inference: PopTorch's shape, the samples of every micro-batch of
        the run on axis 0, [D * B, ...]; `get_anchored_tensor(name)` keeps
        the micro-batch axis, [D, B, ...])."""
        with self._lock:
            if not self._compiled:
                self.compile()
            return self._run(self._arrays(inputs, named_inputs))

    def _run(self, arrays):
        n = len(arrays)
        names = (C.c_char_p * max(n, 1))(*[cstr(k) for k in arrays])
        c_arrays = (_capi.Array * max(n, 1))(*[a for a, _ in arrays.values()])
        steps = self.steps
        st, message = self._cancellable(lib.ts_model_run, self._h, names, c_arrays, n)
        if st == _capi.TS_ERR_NUMERICS:  # say which tensor; the report once
            failed = lib.ts_model_failed_tensor(self._h)
            e = numerics_error(message, failed.decode() if failed else None,
                               lib.ts_get_log_level() >= 1)  # TS_LOG_ERROR: logged, so said once
            e.tensors = None
            if self.options._break_on_nan:
                e.tensors = self._held_again(names, c_arrays, n, steps, e)
            tensors = e.tensors  # noqa: F841 -- pdb.pm() shows this frame's locals
            raise e
        if st and self._start_error is not None:  # the on_start hook's own exception
            e, self._start_error = self._start_error, None
            raise e
        if st:
            raise error_for(st, message)
        del arrays  # the library has read them
        outs = [self.get_anchored_tensor(r) for r in self._returns]
        if not self.training:
            outs = [self._onnx_typed(r, self._samples_first(r, a)) for r, a in zip(self._returns, outs)]
        return outs[0] if len(outs) == 1 else tuple(outs)

    def _onnx_typed(self, name, a):
        """An output an ONNX import declared of a low-precision type (float8,
        float4, int4, ...; held in f32 on its grid) in ml_dtypes' dtype."""
        onnx_type = getattr(lib, "ts_tensor_onnx_type", None)
        code = onnx_type(self.graph.tensor(name)._h) if onnx_type is not None else 0
        return a.astype(_capi.lowbits_dtype(code)) if code in _capi.LOWBITS else a

    def _held_again(self, names, c_arrays, n, steps, e) -> Optional[Inspection]:
        """break_on_nan: the same inputs run again with every tensor held
        (the weights unchanged when the failed run completed no step), so
        the run stops at the same tensor; its Inspection, or None with the
        reason added to e."""
        if self.steps != steps:
            e.args = (f"{e.args[0]}\nbreak_on_nan: the run completed {self.steps - steps} optimizer "
                      "steps before it stopped, so it cannot be replayed as it was; nothing held",)
            return None
        level = lib.ts_get_log_level()
        lib.ts_set_log_level(0)  # the report was logged once already
        try:
            check(lib.ts_model_hold(self._h, 1))
            st, _ = self._cancellable(lib.ts_model_run, self._h, names, c_arrays, n)
        finally:
            lib.ts_model_hold(self._h, 0)
            lib.ts_set_log_level(level)
        if st != _capi.TS_ERR_NUMERICS:
            e.args = (f"{e.args[0]}\nbreak_on_nan: running the inputs again did not stop at a "
                      "non-finite value; nothing held",)
            return None
        return Inspection(self)

    def hold(self, on: bool = True) -> Model:
        """Keeps a copy of every tensor each following run makes (on: True)
        or no more (False; the last held run stays readable), for
        inspect(). A held run costs a device copy per tensor; the copies
        are allocated when it starts, not in the step loop."""
        with self._lock:
            if not self._compiled:
                self.compile()
            check(_capi.function("ts_model_hold", "Model.hold")(self._h, int(bool(on))))
        return self

    def inspect(self) -> Inspection:
        """The tensors of the last held run (see hold), by name, as numpy
        arrays: an Inspection (a Mapping with names(glob), grad(name),
        where(name), stats(name), summary(name)). Before any held run it
        shows parameters, buffers and optimizer state only, and reading
        another tensor is a StateError saying to hold a run."""
        return Inspection(self)

    def _samples_first(self, name, a):
        """An inference output as PopTorch returns it: the anchor's leading
        axes (micro-batches, replicas) merged into the batch axis; a
        scalar of one micro-batch is a scalar (ONNX Runtime's and
        PyTorch's shape ())."""
        rank = len(self.graph.tensor(name).shape)
        if rank == 0 and a.size == 1:
            return a.reshape(())
        extra = a.ndim - rank
        if extra <= 0:  # a mode without a sample axis (final, sum)
            return a
        return a.reshape((-1,) + a.shape[extra + 1:])

    # Runs shorter than this are called on the calling thread: a worker
    # thread costs tens to hundreds of microseconds a call (0.4 ms on a busy
    # 2-core machine, as long as a tiny model's whole run), and Ctrl-C then
    # waits for at most about this long.
    _DIRECT_S = 0.02

    def _cancellable(self, fn, *args):
        """fn(*args), a library call on this model that stops early when
        asked (ts_model_cancel): (status, message of a failure). On the main
        thread, unless the last such call was short, it runs on a worker
        thread while the main thread waits, so that Ctrl-C (any exception
        raised by a signal handler) asks it to stop: once it has stopped,
        that exception is raised, with the library's message when the run
        was cut short. Elsewhere it is called directly (signals reach the
        main thread only)."""
        def call():  # the status, and the message of a failure (kept per thread)
            t0 = time.monotonic()
            st = fn(*args)
            self._last_call_s = time.monotonic() - t0
            return st, _capi.last_error() if st else ""

        last = getattr(self, "_last_call_s", None)
        if threading.current_thread() is not threading.main_thread() or (
                last is not None and last < self._DIRECT_S):
            return call()
        result = []
        done = threading.Event()

        def work():
            try:
                result.append(call())
            finally:
                done.set()

        worker = threading.Thread(target=work, name="tensorscope-run", daemon=True)
        interrupted = None
        try:  # a signal may come as soon as the worker starts, before the loop below waits
            worker.start()
        except BaseException as e:
            interrupted = e
            if worker.ident is None:  # it never started: nothing runs
                raise
        while True:
            try:  # every step of the loop inside: a signal anywhere in it is caught
                if done.is_set():
                    break
                if interrupted is not None:  # a run clears the flag when it starts: ask until it stops
                    self.cancel()
                done.wait(None if interrupted is None else 0.05)
            except BaseException as e:  # KeyboardInterrupt, or a handler's own exception
                if interrupted is None:
                    interrupted = e
        worker.join()
        if interrupted is not None:
            if result and result[0][0] == _capi.TS_ERR_CANCELLED and not interrupted.args:
                interrupted.args = (result[0][1],)  # how far the run got
            raise interrupted
        return result[0]

    # ---- names and anchors
    def get_tensor_names(self) -> List[str]:
        """Every tensor name of the compiled model, sorted (an error before compile)."""
        ptr, n = _capi.STRS(), C.c_size_t()
        check(lib.ts_model_tensor_names(self._h, C.byref(ptr), C.byref(n)))
        return _capi.strings(ptr, n.value)

    def anchor_tensor(self, name: Optional[str], tensor_name: Optional[str] = None,
                      mode: ModeLike = "default", period: int = 0) -> None:
        """Adds an anchor after compile (the next run recompiles, counted);
        the arguments are Options.anchor_tensor's: one name or glob, or a
        short name and a tensor name."""
        from .options import output_mode
        if tensor_name is None:
            name, tensor_name = None, name
        check(lib.ts_model_anchor(self._h, cstr(name), cstr(tensor_name),
                                  output_mode(mode), int(period)))

    def anchors(self) -> List[str]:
        """Short names of every anchor of the compiled model."""
        ptr, n = _capi.STRS(), C.c_size_t()
        check(lib.ts_model_anchor_list(self._h, C.byref(ptr), C.byref(n)))
        return _capi.strings(ptr, n.value)

    def get_anchored_tensor(self, short_name: str) -> np.ndarray:
        """The anchored array of the last run, a copy, in the library's
        layout: per its output mode, ALL is [S, *T] for the S samples
        (micro-batches or steps) of the run, FINAL and SUM are T."""
        a = _capi.Array()
        with self._lock:
            check(lib.ts_model_anchored(self._h, cstr(short_name), C.byref(a)))
            return _capi.to_numpy(a, short_name)

    def lint(self) -> List[str]:
        """Warnings found at compile about mistakes that give bad scores
        without an error (softmax over the batch, NLL on values that are not
        log-probabilities, a parameter with no path to the loss, ...)."""
        ptr, n = _capi.STRS(), C.c_size_t()
        check(lib.ts_model_lint(self._h, C.byref(ptr), C.byref(n)))
        return _capi.strings(ptr, n.value)

    # ---- observation
    def watches(self) -> Dict[str, Dict[str, Any]]:
        """{tensor name: summary dict} of the last run's watches: count,
        zeros, nans, pos_infs, neg_infs, mean, std, min, max, l2, run, step,
        and with histograms log2_zeros, log2_counts, tb_counts; with ranges
        a `range` dict; a 16-bit tensor's (Options.precision) also `stored`
        ("bf16", "f16"), `stored_underflow` and `stored_overflow`: the
        fractions of its values its rounding made 0 and Inf, measured.
        With replicas (Options.replication) each summary is the one over
        every replica's values (its nans and infs summed) with min_replica,
        max_replica (the replica whose values hold the min, the max) and
        nonfinite_replica (the first replica holding a NaN or Inf; -1 for
        none), and `replicas`: each replica's own summary dict, by rank."""
        ptr, n = C.POINTER(_capi.WatchResult)(), C.c_size_t()
        with self._lock:
            check(lib.ts_model_watch_results(self._h, C.byref(ptr), C.byref(n)))
            return self._watch_dicts(ptr, n.value)

    @staticmethod
    def _watch_dicts(ptr, n):
        out, mine = {}, {}  # replicas: each one's row comes before the row over all of them
        for i in range(n):
            r = ptr[i]
            if not r.summary:
                continue
            d = _summary_dict(r.summary.contents)
            d["run"], d["step"] = r.run, r.step
            name = r.name.decode()
            if r.replica >= 0:
                mine.setdefault(name, []).append(d)
                continue
            if name in mine:
                d["replicas"] = mine.pop(name)
                d["min_replica"], d["max_replica"] = r.min_replica, r.max_replica
                d["nonfinite_replica"] = r.nonfinite_replica
            out[name] = d
        return out

    def metrics_report(self) -> str:
        """The metrics report (PyTorch/XLA style) of this process."""
        return metrics_report()

    def memory(self) -> Dict[str, Any]:
        """Bytes held by the compiled model by lifetime class, and the process's;
        on a GPU its memory too (device_in_use, device_peak, device_free,
        device_total: tensorscope's now and at most, the GPU's free and total)."""
        m = _capi.ModelMemory()
        check(lib.ts_model_memory_get(self._h, C.byref(m)))
        out = _capi.as_dict(m, skip=("process",))
        out["process"] = _capi.as_dict(m.process)
        return out

    def memory_line(self) -> str:
        """The memory of memory() on one line."""
        buf = C.create_string_buffer(512)
        return lib.ts_model_memory_line(self._h, buf, len(buf)).decode()

    @property
    def runs(self) -> int:
        """Runs so far (a resumed checkpoint's included)."""
        return lib.ts_model_runs(self._h)

    @property
    def steps(self) -> int:
        """Optimizer steps so far (a resumed checkpoint's included)."""
        return lib.ts_model_steps(self._h)

    @property
    def precision(self) -> str:
        """"f32", "bf16" or "f16" (Options.precision, TS_USE_BF16=1)."""
        return {11: "bf16", 12: "f16"}.get(lib.ts_model_precision(self._h), "f32")

    def loss_scale(self) -> Optional[Tuple[float, int]]:
        """Dynamic loss scaling (Options.loss_scaling; on for f16): the scale
        the next step's loss gradient starts at and the steps skipped so far
        because a gradient overflowed; None when scaling is off."""
        scale, skipped = C.c_double(), C.c_int64()
        on = lib.ts_model_loss_scale(self._h, C.byref(scale), C.byref(skipped))
        return (scale.value, skipped.value) if on else None

    def spike(self) -> Optional[Dict[str, Any]]:
        """The latest spike the detector found (Options.detect_spikes), or
        None: {"step", "signal" ("loss", "rms", "max_abs", "norm", "value"), "tensor",
        "layer", "value", "median", "mad", "z", "crossed" (signals that
        crossed at that step), "action", "count" (spikes so far)}."""
        s = _capi.Spike()
        count = lib.ts_model_spike(self._h, C.byref(s))
        if count == 0:
            return None
        return {"step": s.step, "signal": s.signal.decode(), "tensor": s.tensor.decode(), "layer": s.layer.decode(),
                "value": s.value, "median": s.median, "mad": s.mad, "z": s.z, "crossed": s.crossed,
                "action": lib.ts_spike_action_name(s.action).decode(), "count": count}

    def flops_per_microbatch(self) -> float:
        """FLOPs of one micro-batch (forward, backward and update)."""
        return lib.ts_model_flops_per_microbatch(self._h)

    # ---- learning rate and checkpoints (training)
    def set_lr_schedule(self, schedule: Optional[LRSchedule]) -> None:
        """Follows `schedule` (an LRSchedule; None: constant) from the next
        optimizer step on, counted from the model's step 0: the same rates
        as the CLI's --lr-schedule and --warmup-steps."""
        s = None if schedule is None else C.byref(schedule._struct())
        with self._lock:  # between runs
            check(lib.ts_model_set_lr_schedule(self._h, s))
            self._schedule = schedule

    @property
    def lr_schedule(self) -> Optional[LRSchedule]:
        """The LRSchedule set (None: constant)."""
        return self._schedule

    @property
    def learning_rate(self) -> float:
        """The rate of the last optimizer step (before any: of the first)."""
        return lib.ts_model_learning_rate(self._h)

    @property
    def base_lr(self) -> float:
        """The base rate the schedule scales: the optimizer's lr, or what
        was set. Setting it between runs changes the rate of the following
        steps (the schedule goes on from it); a checkpoint records it."""
        return _capi.function("ts_model_base_lr", "Model.base_lr")(self._h)

    @base_lr.setter
    def base_lr(self, lr: float) -> None:
        set_base_lr = _capi.function("ts_model_set_base_lr", "Model.base_lr")
        with self._lock:  # between runs
            check(set_base_lr(self._h, float(lr)))

    @staticmethod
    def _checkpoint_path(path):
        path = os.fspath(path)
        return os.path.join(path, "checkpoint.tsck") if os.path.isdir(path) else path

    def save_checkpoint(self, path: Union[str, os.PathLike], loader: Optional[Any] = None) -> str:
        """Writes the whole training state -- parameters, optimizer state,
        run and step counts, the schedule, and with `loader` (a DataLoader)
        its position and shuffle order -- in the CLI's .tsck format,
        atomically. `path` is a file, or a directory for DIR/checkpoint.tsck
        (the CLI's --checkpoint-dir). Returns the file written."""
        path = self._checkpoint_path(path)
        with self._lock:  # not during a run on another thread
            self._compile_once()
            check(lib.ts_checkpoint_save(cstr(path), self._h, loader._h if loader is not None else None))
        return path

    def load_checkpoint(self, path: Union[str, os.PathLike], loader: Optional[Any] = None) -> None:
        """Continues from a checkpoint written by save_checkpoint or by the
        CLI (`--checkpoint-dir DIR`; a directory means DIR/checkpoint.tsck,
        as `--resume DIR`). The model must be the same (graph, optimizer,
        base rate and schedule) and `loader` the same data and settings:
        the following runs then write the same weights as a run never
        interrupted. A checkpoint that does not fit raises and changes nothing."""
        with self._lock:
            self._compile_once()
            check(lib.ts_checkpoint_load(cstr(self._checkpoint_path(path)), self._h,
                                         loader._h if loader is not None else None))

    def _compile_once(self):
        if not self._compiled:
            self.compile()

    def save_graph(self, path: Union[str, os.PathLike]) -> None:
        """Writes the compiled graph as an ONNX file (docs/onnx.md#the-graph-as-an-onnx-file),
        atomically: the forward ops as standard ONNX ops under this model's
        tensor names, and for a training model the backward pass
        (Gradient___*) and the optimizer step (UpdatedVar___*, the state's
        next values), in standard ops where they have a standard form, else
        in the documented domain `ai.tensorscope`. Parameters and optimizer
        state are initializers holding their current values; Netron opens
        it, onnx.checker accepts it, onnxruntime runs an inference model's.
        Compiles the model first when it is not."""
        fn = _capi.function("ts_model_save_graph", "Model.save_graph")
        self._compile_once()
        with self._lock:
            check(fn(self._h, cstr(os.fspath(path))))

    def dump(self, fmt: str = "text", locations: bool = False, backward: bool = False) -> str:
        """The graph with this model's compiled shapes and observation flags;
        backward=True adds the backward pass and optimizer step (training)."""
        return self.graph.dump(self, fmt, locations, backward)


def _tensor(graph, t):
    return t if isinstance(t, Tensor) else graph.tensor(t)


def training_model(model: Any, options: Optional[Options] = None, optimizer: Any = None,
                   loss: Optional[TensorLike] = None, example_inputs: Optional[Sequence[Any]] = None,
                   lr_schedule: Optional[LRSchedule] = None) -> Model:
    """A training model of `model`, minimising `loss` with `optimizer`
    (ts.SGD, ts.Adam, ts.AdamW), its rate following `lr_schedule` (an
    LRSchedule, or a torch StepLR or CosineAnnealingLR stepped once per
    optimizer step; None: constant):

    - a ts.Graph: `loss` is its loss tensor or its name (default "loss");
    - a torch.nn.Module, captured (Options.capture: torch.export, or ONNX) with
      `example_inputs` (the inputs of one micro-batch): with loss=None its
      forward returns the loss, last (PopTorch's convention); with
      loss="cross_entropy" or "nll" its forward returns scores or
      log-probabilities and tensorscope adds the loss over an input
      "labels" (i32 [B], or [B, T] for scores [B, T, V]: a language
      model's per-token loss, averaged over every token). A call returns
      what PopTorch's does: forward's outputs, then the loss ((output,
      loss); the loss alone when forward returns only that). See
      TorchModel.copy_weights_to_torch.

    A call of a graph's model returns the loss."""
    if not isinstance(model, Graph):
        from ._torch import training_model_of_module
        torch_scheduler = lr_schedule is not None and not isinstance(lr_schedule, LRSchedule)
        m = training_model_of_module(model, options, optimizer, example_inputs, loss, torch_scheduler)
    elif optimizer is None:
        raise TypeError("training_model needs an optimizer, e.g. optimizer=ts.SGD(lr=0.01)")
    else:
        m = new_training_model(Model, model, options, optimizer, "loss" if loss is None else loss)
    if lr_schedule is not None and not isinstance(lr_schedule, LRSchedule):
        from ._torch import lr_schedule_of  # a torch LR scheduler
        lr_schedule = lr_schedule_of(lr_schedule)
    if lr_schedule is not None:
        m.set_lr_schedule(lr_schedule)
    return m


def new_training_model(cls, graph, options, optimizer, loss):
    options = options or Options()
    loss_t = _tensor(graph, loss)
    h = C.c_void_p()
    check(lib.ts_model_training(C.byref(h), graph._h, loss_t._h, options._h, optimizer))
    return cls(graph, options, h.value, True, [loss_t.name])


def inference_model(model: Any, options: Optional[Options] = None,
                    outputs: Optional[Sequence[TensorLike]] = None,
                    example_inputs: Optional[Sequence[Any]] = None) -> Model:
    """An inference model computing `outputs` (Tensors or names; default:
    the outputs an ONNX import recorded) of `model`:

    - a ts.Graph;
    - a torch.nn.Module (PopTorch's inferenceModel), captured at
      `example_inputs` (the inputs of one micro-batch) as
      Options.capture says, each module in its own train/eval mode, its
      weights and buffers copied as they are when it is wrapped; the
      outputs default to forward's.

    A call returns them as numpy arrays, as PopTorch does, every
    micro-batch's samples on axis 0 ([D * B, ...]); they are anchored
    under their names too."""
    if not isinstance(model, Graph):
        from ._torch import inference_model_of_module
        return inference_model_of_module(model, options, outputs, example_inputs)
    return new_inference_model(Model, model, options, outputs or model.outputs)


def new_inference_model(cls, graph, options, outputs):
    options = options or Options()
    outs = [_tensor(graph, t) for t in outputs]
    if not outs:
        raise ValueError("inference_model needs outputs=[...] (tensors or names)")
    ptrs = (C.c_void_p * len(outs))(*[t._h for t in outs])
    h = C.c_void_p()
    check(lib.ts_model_inference(C.byref(h), graph._h, ptrs, len(outs), options._h))
    return cls(graph, options, h.value, False, [t.name for t in outs])


def metrics_report() -> str:
    """The metrics report: `Metric:` blocks then `Counter:` blocks."""
    return _capi.take_string(lib.ts_metrics_report())
