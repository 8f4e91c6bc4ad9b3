"""Options (PopTorch's words), optimizers and outfeed queues."""
import collections
import ctypes as C
import enum
import sys
import threading
import weakref

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


def output_mode(mode):
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


class Options:
    """A run's options. Every setter returns the options, so they chain:
    `ts.Options().device_iterations(4).gradient_accumulation(2)`."""

    def __init__(self):
        self._h = _capi.checked_handle(lib.ts_options_new(), "ts_options_new")
        self._queues = []  # queues fed by models of these options must outlive them

    def __del__(self):
        if getattr(self, "_h", None) and not sys.is_finalizing():
            lib.ts_options_free(self._h)
            self._h = None

    def device_iterations(self, d):
        """D: optimizer steps (training) or batches (inference) per run."""
        check(lib.ts_options_set_device_iterations(self._h, int(d)))
        return self

    def gradient_accumulation(self, a):
        """A: micro-batches whose gradients are averaged before each step."""
        check(lib.ts_options_set_gradient_accumulation(self._h, int(a)))
        return self

    def output_mode(self, mode, period=0):
        """The mode of anchors that do not set their own (period for EveryN)."""
        check(lib.ts_options_set_output_mode(self._h, output_mode(mode), int(period)))
        return self

    def anchor_tensor(self, short_name, tensor_name, mode=OutputMode.Default, period=0):
        """Anchors `tensor_name` under `short_name` (names are checked at
        compile; `model.get_tensor_names()` lists them)."""
        check(lib.ts_options_anchor(self._h, cstr(short_name), cstr(tensor_name),
                                    output_mode(mode), int(period)))
        return self

    def watch(self, pattern, what="stats", period=1):
        """Summaries of every tensor whose name matches `pattern` (a glob with
        *, ? or [, else one exact name: ts_name_matches), every `period` runs; `what` is a Watch
        flag set or a string such as "stats|histogram"."""
        check(lib.ts_options_watch(self._h, cstr(pattern), _watch_what(what), int(period)))
        return self

    def outfeed(self, queue, pre_accumulated=False):
        """Streams every parameter gradient into `queue` as `<param>_grad`:
        per micro-batch before accumulation (pre_accumulated=True) or once
        per optimizer step."""
        check(lib.ts_options_outfeed_gradients(self._h, queue._h, int(bool(pre_accumulated))))
        self._queues.append(queue)
        return self

    def check_numerics(self, mode):
        """"off", "output" (each layer output and its gradient) or "op" (every op)."""
        code = C.c_int()
        check(lib.ts_check_numerics_parse(cstr(mode), C.byref(code)))
        check(lib.ts_options_set_check_numerics(self._h, code.value))
        return self

    def threads(self, n):
        """Worker threads for elementwise ops and reductions (0 = every core)."""
        check(lib.ts_options_set_threads(self._h, int(n)))
        return self

    def device(self, name):
        """Where the model runs: "cpu" (the default), "cuda" (the first GPU)
        or "cuda:N". Unset, the TS_DEVICE environment variable names it. A
        device this build or machine lacks fails when the model is made
        (UnsupportedError saying which: built without CUDA, no GPU)."""
        check(lib.ts_options_set_device(self._h, cstr(name)))
        return self

    def replication(self, replicas, check_every=100):
        """R data-parallel replicas, one per rank of the MPI job (see
        tensorscope.dist_init): every rank passes the combined batch, each
        computes its slice, gradients are averaged before each step; anchors
        gain a replica axis after the sample axis."""
        check(lib.ts_options_set_replication(self._h, int(replicas), int(check_every)))
        return self

    def pipeline(self, stages, split_at, schedule="gpipe"):
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
        return self


# ------------------------------------------------------------ optimizers

def _optimizer(base, **fields):
    """A ts_optimizer from the library's constructor, with the fields the
    caller named (None keeps the library's default, PyTorch's)."""
    for name, value in fields.items():
        if value is not None:
            setattr(base, name, value)
    return base


def SGD(lr, momentum=0.0, weight_decay=0.0, dampening=None, nesterov=None):
    """torch.optim.SGD's parameters."""
    nesterov = None if nesterov is None else int(bool(nesterov))
    return _optimizer(lib.ts_sgd(lr, momentum, weight_decay), dampening=dampening,
                      nesterov=nesterov)


def Adam(lr=1e-3, betas=None, eps=None, weight_decay=None):
    """torch.optim.Adam's parameters."""
    b1, b2 = betas if betas is not None else (None, None)
    return _optimizer(lib.ts_adam(lr), beta1=b1, beta2=b2, eps=eps, weight_decay=weight_decay)


def AdamW(lr=1e-3, betas=None, eps=None, weight_decay=0.01):
    """torch.optim.AdamW's parameters."""
    b1, b2 = betas if betas is not None else (None, None)
    return _optimizer(lib.ts_adamw(lr, weight_decay), beta1=b1, beta2=b2, eps=eps)


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

    def __init__(self, name="outfeed", mode="all", depth=64, filters=None,
                 drop_when_full=False):
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

    def __iter__(self):
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

    def __len__(self):
        """Records waiting to be iterated (mode "all")."""
        if self._mode == "all":
            self._wait_delivered(30.0)
        return len(self._records)

    @property
    def name(self):
        return lib.ts_outfeed_name(self._h).decode()

    def accepts(self, key):
        """Whether `key` passes the queue's filters."""
        return bool(lib.ts_outfeed_accepts(self._h, cstr(key)))

    def flush(self):
        """Mode "all": waits until the consumer thread has handed every
        record enqueued so far to this queue (iterating waits too). Mode
        "last" has no consumer thread: a StateError."""
        check(_capi.function("ts_outfeed_flush", "OutfeedQueue.flush")(self._h))

    def counts(self):
        """{"enqueued", "dequeued", "dropped", "wait_ns"} so far."""
        return _capi.as_dict(lib.ts_outfeed_get_counts(self._h))

    @property
    def _h(self):
        return self._owned.ptr

    def __del__(self):
        # Freed (its consumer thread stopped) once nothing uses it: the graphs
        # and models it streams from pin it.
        _capi.release(self)
