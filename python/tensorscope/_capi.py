"""The C library through ctypes: its structs, its prototypes, its errors.

Everything here mirrors include/tensorscope.h one to one (tests/test_abi.py
checks every struct's size and field offsets against the C compiler). The
rest of the package only calls `lib.<function>` and `check(status)`.
"""
import ctypes as C
import operator
import weakref
import os
import sys
import threading

import numpy as np

from .errors import (InvalidArgumentError, OutOfMemoryError, StateError, UnsupportedError,
                     error_for)

TS_ERR_NOT_FOUND = 6  # ts_status values the binding acts on
TS_ERR_NUMERICS = 8
TS_ERR_CANCELLED = 12
TS_ERR_SPIKE = 13
TS_MAX_DIMS = 8
TS_LOG2_BINS = 256
TS_TB_BINS = 1551

# ---------------------------------------------------------------- loading

_HERE = os.path.dirname(os.path.abspath(__file__))


def _load():
    # TENSORSCOPE_LIBRARY points at another build (e.g. build/libtensorscope.so).
    path = os.environ.get("TENSORSCOPE_LIBRARY") or os.path.join(_HERE, "libtensorscope.so")
    try:
        # RTLD_GLOBAL (it exports only ts_* names): loaded locally, its
        # libunwind dependency breaks C++ exception unwinding in libraries
        # loaded after it (PyTorch's ONNX export aborted in libgcc_s).
        return C.CDLL(path, mode=C.RTLD_GLOBAL)
    except OSError as e:
        raise ImportError(
            f"tensorscope: cannot load the library {path} ({e}); reinstall the package "
            "with `pip install ./python` from the repository, or set TENSORSCOPE_LIBRARY "
            "to a libtensorscope.so") from None


lib = _load()

# ---------------------------------------------------------------- integers
# ctypes keeps the low bits of an int too big for a C integer (2**64 + 5
# passed as an int64_t is 5). Every int the package hands the library goes
# through a declared function's arguments, a struct field or an array, each
# checked below, and one that does not fit is refused with InvalidArgumentError.


def _int_range(ctype):
    bits = 8 * C.sizeof(ctype)
    if ctype(-1).value < 0:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


_INT_RANGES = {t: _int_range(t) for t in (C.c_int, C.c_uint, C.c_int32, C.c_uint32, C.c_int64,
                                          C.c_uint64, C.c_size_t)}
_INT_NAMES = {C.c_int32: "int32_t", C.c_uint32: "uint32_t", C.c_size_t: "size_t",  # aliases on most
              C.c_int: "int", C.c_uint: "unsigned", C.c_int64: "int64_t", C.c_uint64: "uint64_t"}


def fit_int(value, ctype, what):
    """`value` if it is no int or one that `ctype` holds; else InvalidArgumentError naming
    `what` (None: the value alone)."""
    lo, hi = _INT_RANGES.get(ctype, (None, None))
    if lo is None or isinstance(value, (float, C._SimpleCData)) or not hasattr(type(value), "__index__"):
        return value
    v = operator.index(value)  # an int, or a NumPy integer as ctypes would read it
    if not lo <= v <= hi:
        raise InvalidArgumentError(f"{what + '=' if what else ''}{v} does not fit the library's "
                                   f"{_INT_NAMES[ctype]} ({lo}..{hi})")
    return value


def int_array(ctype, values, what, length=None):
    """A C array of `ctype` holding `values` (ints), every one checked to fit;
    `length` entries (the values, then zeros) when given."""
    values = [fit_int(int(v), ctype, f"{what}[{i}]") for i, v in enumerate(values)]
    return (ctype * (len(values) if length is None else length))(*values)


def _checking(f, argtypes):
    """`f` (a C function) behind a check that its integer arguments fit their
    C types; f itself when it takes none. (A check in an argument type's
    from_param would surface as ctypes.ArgumentError.)"""
    ints = [(i, t) for i, t in enumerate(argtypes) if t in _INT_RANGES]
    if not ints:
        return f

    def call(*args):
        for i, t in ints:
            if i < len(args):
                fit_int(args[i], t, None)
        return f(*args)
    call.__name__, call.__wrapped__ = f.__name__, f
    return call


class Struct(C.Structure):
    """A struct whose integer fields refuse, by name, an int they cannot hold
    (at construction and on assignment)."""

    def __setattr__(self, name, value):
        for field, ctype in type(self)._fields_:
            if field == name:
                fit_int(value, ctype, name)
                break
        super().__setattr__(name, value)


# ---------------------------------------------------------------- structs


class Array(Struct):  # ts_array
    _fields_ = [("dtype", C.c_int), ("ndim", C.c_int), ("shape", C.c_int64 * TS_MAX_DIMS),
                ("data", C.c_void_p)]


class Conv2dParams(Struct):  # ts_conv2d_params
    _fields_ = [(n, C.c_int) for n in (
        "stride_h", "stride_w", "pad_top", "pad_bottom", "pad_left", "pad_right", "dilation_h",
        "dilation_w", "groups", "same")]


class ConvTranspose2dParams(Struct):  # ts_conv_transpose2d_params
    _fields_ = [(n, C.c_int) for n in (
        "stride_h", "stride_w", "pad_top", "pad_bottom", "pad_left", "pad_right", "output_pad_h",
        "output_pad_w", "dilation_h", "dilation_w", "groups")]


class Conv3dParams(Struct):  # ts_conv3d_params
    _fields_ = [(n, C.c_int) for n in (
        "stride_d", "stride_h", "stride_w", "pad_front", "pad_back", "pad_top", "pad_bottom",
        "pad_left", "pad_right", "dilation_d", "dilation_h", "dilation_w", "groups",
        "output_pad_d", "output_pad_h", "output_pad_w")]


class Pool2dParams(Struct):  # ts_pool2d_params
    _fields_ = [(n, C.c_int) for n in (
        "kernel_h", "kernel_w", "stride_h", "stride_w", "pad_top", "pad_bottom", "pad_left",
        "pad_right", "exclude_pad", "dilation_h", "dilation_w", "ceil_mode")]


class Optimizer(Struct):  # ts_optimizer
    _fields_ = [("kind", C.c_int), ("lr", C.c_float), ("momentum", C.c_float),
                ("dampening", C.c_float), ("nesterov", C.c_int), ("weight_decay", C.c_float),
                ("beta1", C.c_float), ("beta2", C.c_float), ("eps", C.c_float)]

    def __repr__(self):  # ts.SGD(...) as it would be written
        kind = ("SGD", "Adam", "AdamW")[self.kind] if 0 <= self.kind < 3 else f"kind {self.kind}"
        f = lambda v: f"{v:.7g}"  # noqa: E731 (floats as the library holds them)
        if self.kind == 0:
            args = (f"lr={f(self.lr)}, momentum={f(self.momentum)}, weight_decay={f(self.weight_decay)}, "
                    f"dampening={f(self.dampening)}, nesterov={bool(self.nesterov)}")
        else:
            args = (f"lr={f(self.lr)}, betas=({f(self.beta1)}, {f(self.beta2)}), eps={f(self.eps)}, "
                    f"weight_decay={f(self.weight_decay)}")
        return f"{kind}({args})"


class Stats(Struct):  # ts_stats
    _fields_ = [("count", C.c_int64), ("zeros", C.c_int64), ("nans", C.c_int64),
                ("pos_infs", C.c_int64), ("neg_infs", C.c_int64), ("mean", C.c_double),
                ("std", C.c_double), ("min", C.c_double), ("max", C.c_double),
                ("l2", C.c_double)]


class Range(Struct):  # ts_range
    _fields_ = [(n, C.c_double) for n in (
        "fp16_underflow", "fp16_overflow", "bf16_underflow", "bf16_overflow",
        "e4m3_underflow", "e4m3_overflow", "e5m2_underflow", "e5m2_overflow")]


class Summary(Struct):  # ts_summary
    _fields_ = [("what", C.c_int), ("stats", Stats), ("log2_zeros", C.c_int64),
                ("log2_counts", C.c_int64 * TS_LOG2_BINS), ("tb_counts", C.c_int64 * TS_TB_BINS),
                ("range", Range), ("stored", C.c_int), ("stored_underflow", C.c_double),
                ("stored_overflow", C.c_double)]


class WatchResult(Struct):  # ts_watch_result
    _fields_ = [("name", C.c_char_p), ("run", C.c_int64), ("step", C.c_int64),
                ("summary", C.POINTER(Summary)), ("replica", C.c_int),
                ("min_replica", C.c_int), ("max_replica", C.c_int), ("nonfinite_replica", C.c_int)]


class OutfeedConfig(Struct):  # ts_outfeed_config
    _fields_ = [("name", C.c_char_p), ("mode", C.c_int), ("depth", C.c_int),
                ("filters", C.POINTER(C.c_char_p)), ("n_filters", C.c_int),
                ("drop_when_full", C.c_int)]


class OutfeedRecord(Struct):  # ts_outfeed_record
    _fields_ = [("run", C.c_int64), ("sample", C.c_int64), ("key", C.c_char_p),
                ("array", Array), ("replica", C.c_int), ("stage", C.c_int)]


class OutfeedCounts(Struct):  # ts_outfeed_counts
    _fields_ = [("enqueued", C.c_int64), ("dequeued", C.c_int64), ("dropped", C.c_int64),
                ("wait_ns", C.c_int64)]


class CompareResult(Struct):  # ts_compare_result
    _fields_ = [("count", C.c_int64), ("mismatches", C.c_int64), ("max_abs", C.c_double),
                ("max_abs_index", C.c_int64), ("max_rel", C.c_double), ("min_atol", C.c_double),
                ("a", Stats), ("ref", Stats), ("pass", C.c_int), ("rel_error", C.c_double)]


class DiffResult(Struct):  # ts_diff_result
    _fields_ = [("hash_a", C.c_uint64), ("hash_b", C.c_uint64), ("kind", C.c_int), ("cmp", CompareResult)]


class RerunDiff(Struct):  # ts_rerun_diff
    _fields_ = [("name", C.c_char_p), ("max_abs_diff", C.c_double), ("changed", C.c_int64), ("numel", C.c_int64)]


class RerunResult(Struct):  # ts_rerun_result
    _fields_ = [("loss", C.c_double), ("held_loss", C.c_double), ("diffs", C.POINTER(RerunDiff)), ("n_diffs", C.c_size_t)]


class MemoryBuffer(Struct):  # ts_memory_buffer
    _fields_ = [("tensor", C.c_void_p), ("mclass", C.c_int), ("gradient", C.c_int), ("start", C.c_int64),
                ("end", C.c_int64), ("bytes", C.c_int64)]


class MemoryUsage(Struct):  # ts_memory_usage
    _fields_ = [("rss", C.c_int64), ("pss", C.c_int64), ("uss", C.c_int64)]


class MemwatchStats(Struct):  # ts_memwatch_stats
    _fields_ = [("latest", MemoryUsage), ("peak", MemoryUsage), ("latest_s", C.c_double),
                ("peak_rss_s", C.c_double), ("samples", C.c_int64), ("processes", C.c_int),
                ("period_ms", C.c_int), ("running", C.c_int)]


class ModelMemory(Struct):  # ts_model_memory
    _fields_ = [("parameters", C.c_int64), ("gradients", C.c_int64),
                ("optimizer_state", C.c_int64), ("activations", C.c_int64),
                ("anchors", C.c_int64), ("activations_without_reuse", C.c_int64),
                ("process", MemoryUsage), ("device_in_use", C.c_int64), ("device_peak", C.c_int64),
                ("device_free", C.c_int64), ("device_total", C.c_int64)]


class LoaderConfig(Struct):  # ts_loader_config
    _fields_ = [("batch_size", C.c_int64), ("first", C.c_int64), ("count", C.c_int64),
                ("shuffle", C.c_int), ("seed", C.c_uint64), ("drop_last", C.c_int)]


class Spike(Struct):  # ts_spike
    _fields_ = [("step", C.c_int64), ("signal", C.c_char_p), ("tensor", C.c_char_p), ("layer", C.c_char_p),
                ("value", C.c_double), ("median", C.c_double), ("mad", C.c_double), ("z", C.c_double),
                ("crossed", C.c_int), ("action", C.c_int)]


class LrSchedule(Struct):  # ts_lr_schedule
    _fields_ = [("kind", C.c_int), ("warmup_steps", C.c_int64), ("step_size", C.c_int64),
                ("gamma", C.c_double), ("total_steps", C.c_int64), ("min_lr", C.c_double)]


class OnnxInput(Struct):  # ts_onnx_input
    _fields_ = [("name", C.c_char_p), ("ndim", C.c_int), ("shape", C.c_int64 * TS_MAX_DIMS),
                ("value", C.POINTER(Array))]


SINK_FN = C.CFUNCTYPE(None, C.c_void_p, C.POINTER(OutfeedRecord))
LOG_FN = C.CFUNCTYPE(None, C.c_void_p, C.c_int, C.c_char_p)
WEIGHT_SKIP_FN = C.CFUNCTYPE(None, C.c_void_p, C.c_char_p, C.c_int)  # ts_weights_skipped_fn
START_FN = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_void_p)  # ts_start_fn
# the Python Model of each library model, for the hooks the library calls with its handle
models_by_handle = weakref.WeakValueDictionary()

# ------------------------------------------------------------- prototypes

P = C.c_void_p  # every opaque handle
S = C.c_char_p
I64P = C.POINTER(C.c_int64)
STRS = C.POINTER(C.c_char_p)
_st = C.c_int  # ts_status

_PROTOTYPES = {
    "ts_version": (S, []),
    "ts_status_name": (S, [_st]),
    "ts_last_error": (S, []),
    "ts_clear_error": (None, []),
    "ts_set_log_level": (None, [C.c_int]),
    "ts_set_log_vmodule": (_st, [S]),
    "ts_memwatch_start": (_st, [C.c_int]),
    "ts_memwatch_stop": (None, []),
    "ts_memwatch_latest": (_st, [C.POINTER(MemwatchStats)]),
    "ts_set_log_callback": (None, [LOG_FN, C.c_void_p]),
    "ts_get_log_level": (C.c_int, []),
    "ts_log_write": (None, [C.c_int, C.c_char_p]),
    "ts_set_limit": (_st, [C.c_int, C.c_uint64]),
    "ts_has_feature": (C.c_int, [C.c_char_p]),
    "ts_device_check": (_st, [C.c_char_p]),
    "ts_device_describe": (_st, [C.c_char_p, C.c_char_p, C.c_size_t]),
    "ts_gpus_describe": (_st, [C.c_char_p, C.c_size_t, C.POINTER(C.c_int)]),
    "ts_get_limit": (C.c_uint64, [C.c_int]),
    "ts_parse_size": (_st, [S, C.POINTER(C.c_uint64)]),
    "ts_array_shape_str": (S, [C.POINTER(Array), C.c_char_p, C.c_size_t]),
    # graph
    "ts_graph_new": (P, [C.c_uint64]),
    "ts_graph_free": (None, [P]),
    "ts_graph_status": (_st, [P]),
    "ts_scope_push": (_st, [P, S]),
    "ts_scope_pop": (_st, [P]),
    "ts_graph_at": (P, [P, S, C.c_int]),
    "ts_tensor_set_name": (_st, [P, S]),
    "ts_tensor_name": (S, [P]),
    "ts_tensor_info": (_st, [P, C.POINTER(Array)]),
    "ts_tensor_op": (S, [P]),
    "ts_tensor_input_count": (C.c_int, [P]),
    "ts_tensor_input": (P, [P, C.c_int]),
    "ts_tensor_is_buffer": (C.c_int, [P]),
    "ts_tensor_location": (S, [P, C.c_char_p, C.c_size_t]),
    "ts_graph_find": (P, [P, S]),
    "ts_graph_closest_names": (C.c_char_p, [P, S, C.c_char_p, C.c_size_t]),
    "ts_graph_tensor_count": (C.c_size_t, [P]),
    "ts_graph_tensor_at": (P, [P, C.c_size_t]),
    "ts_param_set": (_st, [P, C.POINTER(Array)]),
    "ts_param_set_trainable": (_st, [P, C.c_int]),
    "ts_param_trainable": (C.c_int, [P]),
    "ts_graph_save_weights": (_st, [P, S]),
    "ts_graph_load_weights": (_st, [P, S]),
    "ts_graph_load_weights_matching": (_st, [P, S, WEIGHT_SKIP_FN, C.c_void_p, C.POINTER(C.c_size_t)]),
    "ts_graph_dump": (C.c_void_p, [P, P, C.c_int, C.c_int]),
    # options
    "ts_output_mode_parse": (_st, [S, C.POINTER(C.c_int)]),
    "ts_output_mode_name": (S, [C.c_int]),
    "ts_check_numerics_parse": (_st, [S, C.POINTER(C.c_int)]),
    "ts_options_new": (P, []),
    "ts_options_free": (None, [P]),
    "ts_options_set_device_iterations": (_st, [P, C.c_int]),
    "ts_options_set_gradient_accumulation": (_st, [P, C.c_int]),
    "ts_options_set_output_mode": (_st, [P, C.c_int, C.c_int]),
    "ts_options_anchor": (_st, [P, S, S, C.c_int, C.c_int]),
    "ts_options_watch": (_st, [P, S, C.c_int, C.c_int]),
    "ts_options_watch_stability": (_st, [P, S, C.c_int]),
    "ts_options_set_check_numerics": (_st, [P, C.c_int]),
    "ts_options_detect_spikes": (_st, [P, C.c_double, C.c_int, C.c_int, S]),
    "ts_spike_action_parse": (_st, [S, C.POINTER(C.c_int)]),
    "ts_spike_action_name": (S, [C.c_int]),
    "ts_options_set_threads": (_st, [P, C.c_int]),
    "ts_options_set_device": (_st, [P, C.c_char_p]),
    "ts_options_set_allow_tf32": (_st, [P, C.c_int]),
    "ts_options_set_log_layer_shapes": (_st, [P, C.c_int]),
    "ts_options_set_on_start": (_st, [P, START_FN, C.c_void_p]),
    "ts_set_error": (_st, [C.c_int, S]),
    "ts_options_set_replication": (_st, [P, C.c_int, C.c_int]),
    "ts_options_set_pipeline": (_st, [P, C.c_int, STRS, C.c_int]),
    "ts_options_set_pipeline_schedule": (_st, [P, C.c_int]),
    "ts_options_set_trace": (_st, [P, S, C.c_int64, C.c_int64]),
    "ts_options_set_dump_debug": (_st, [P, S, C.c_int64, C.c_int64, S, C.c_int, C.c_int64]),
    "ts_model_dump_debug_plan": (_st, [P, C.c_int64, C.POINTER(C.c_int64), C.POINTER(C.c_int64), C.POINTER(C.c_int64)]),
    "ts_options_set_precision": (_st, [P, C.c_int]),
    "ts_options_set_loss_scaling": (_st, [P, C.c_int, C.c_float, C.c_float, C.c_float, C.c_int]),
    "ts_graph_autocast": (_st, [P, C.c_int]),
    "ts_tensor_precision": (C.c_int, [P]),
    "ts_model_precision": (C.c_int, [P]),
    "ts_model_loss_scale": (C.c_int, [P, C.POINTER(C.c_double), C.POINTER(C.c_int64)]),
    "ts_model_spike": (C.c_int64, [P, C.POINTER(Spike)]),
    # MPI jobs
    "ts_dist_init": (_st, [P, P]),
    "ts_dist_finalize": (_st, []),
    "ts_dist_rank": (C.c_int, []),
    "ts_dist_size": (C.c_int, []),
    "ts_dist_available": (C.c_int, []),
    "ts_dist_set_timeout": (_st, [C.c_double]),
    # optimizers
    "ts_sgd": (Optimizer, [C.c_float, C.c_float, C.c_float]),
    "ts_adam": (Optimizer, [C.c_float]),
    "ts_adamw": (Optimizer, [C.c_float, C.c_float]),
    "ts_param_set_optimizer": (_st, [P, C.POINTER(Optimizer)]),
    # model
    "ts_model_training": (_st, [C.POINTER(P), P, P, P, Optimizer]),
    "ts_model_inference": (_st, [C.POINTER(P), P, C.POINTER(P), C.c_int, P]),
    "ts_model_free": (None, [P]),
    "ts_model_finish": (_st, [P]),
    "ts_model_compile": (_st, [P]),
    "ts_model_save_graph": (_st, [P, S]),
    "ts_model_tensor_names": (_st, [P, C.POINTER(STRS), C.POINTER(C.c_size_t)]),
    "ts_model_anchor": (_st, [P, S, S, C.c_int, C.c_int]),
    "ts_model_run": (_st, [P, STRS, C.POINTER(Array), C.c_int]),
    "ts_model_cancel": (_st, [P]),
    "ts_model_anchored": (_st, [P, S, C.POINTER(Array)]),
    "ts_model_anchor_list": (_st, [P, C.POINTER(STRS), C.POINTER(C.c_size_t)]),
    "ts_model_runs": (C.c_int64, [P]),
    "ts_model_steps": (C.c_int64, [P]),
    "ts_model_flops_per_microbatch": (C.c_double, [P]),
    "ts_model_watch_results": (_st, [P, C.POINTER(C.POINTER(WatchResult)),
                                     C.POINTER(C.c_size_t)]),
    "ts_model_memory_get": (_st, [P, C.POINTER(ModelMemory)]),
    "ts_model_memory_line": (S, [P, C.c_char_p, C.c_size_t]),
    "ts_model_failed_tensor": (S, [P]),
    "ts_model_hold": (_st, [P, C.c_int]),
    "ts_model_held": (_st, [P, S, C.POINTER(Array)]),
    "ts_model_is_held": (C.c_int, [P, S]),
    "ts_model_held_names": (_st, [P, C.POINTER(STRS), C.POINTER(C.c_size_t)]),
    "ts_model_tensor_origin": (_st, [P, S, C.c_char_p, C.c_size_t]),
    "ts_model_held_eval": (_st, [P, S, C.POINTER(Array)]),
    "ts_eval_free": (None, [C.POINTER(Array)]),
    "ts_model_rerun": (_st, [P, S, C.POINTER(Array), C.POINTER(RerunResult)]),
    "ts_model_held_before": (_st, [P, S, C.POINTER(Array)]),
    "ts_lr_schedule_parse": (_st, [S, C.POINTER(C.c_int)]),
    "ts_lr_schedule_name": (S, [C.c_int]),
    "ts_lr_at": (C.c_double, [C.POINTER(LrSchedule), C.c_double, C.c_int64]),
    "ts_model_set_lr_schedule": (_st, [P, C.POINTER(LrSchedule)]),
    "ts_model_learning_rate": (C.c_double, [P]),
    "ts_model_set_base_lr": (_st, [P, C.c_double]),
    "ts_model_base_lr": (C.c_double, [P]),
    "ts_model_check_watches": (_st, [P]),
    "ts_checkpoint_save": (_st, [S, P, P]),
    "ts_checkpoint_load": (_st, [S, P, P]),
    "ts_loader_epoch": (C.c_int64, [P]),
    "ts_model_lint": (_st, [P, C.POINTER(STRS), C.POINTER(C.c_size_t)]),
    "ts_compare_arrays": (_st, [C.POINTER(Array), C.POINTER(Array), C.c_double, C.c_double,
                                C.POINTER(CompareResult)]),
    "ts_diff_arrays": (_st, [C.POINTER(Array), C.POINTER(Array), C.c_double, C.c_double, C.POINTER(DiffResult)]),
    "ts_compare_first_jump": (_st, [C.POINTER(C.c_double), C.c_int, C.c_double, C.c_double,
                                    C.POINTER(C.c_int), C.POINTER(C.c_double), C.POINTER(C.c_double)]),
    "ts_model_memory_plan": (_st, [P, C.POINTER(MemoryBuffer), C.c_size_t, C.POINTER(C.c_size_t), C.POINTER(C.c_int64)]),
    "ts_model_memory_point": (P, [P, C.c_int64, C.POINTER(C.c_int)]),
    "ts_plot_heatmap": (_st, [C.c_char_p, C.c_char_p, C.POINTER(C.c_char_p), C.c_int, C.POINTER(C.c_int64), C.c_int,
                              C.POINTER(C.c_double), C.c_int]),
    "ts_plot_memory": (_st, [C.c_char_p, C.c_char_p, C.POINTER(C.c_double), C.POINTER(C.c_char_p), C.c_int, C.c_int, C.c_int,
                             C.c_int]),
    "ts_plot_precision": (_st, [C.c_char_p, C.POINTER(C.c_char_p), C.POINTER(C.c_double),
                                C.POINTER(C.c_double), C.c_int, C.c_int]),
    # summaries and plots
    "ts_summarize_f32": (_st, [C.POINTER(C.c_float), C.c_int64, C.c_int, C.POINTER(Summary)]),
    "ts_summary_line": (S, [S, C.POINTER(Array), C.POINTER(Stats), C.c_char_p, C.c_size_t]),
    "ts_summary_merge": (_st, [C.POINTER(Summary), C.POINTER(Summary)]),
    "ts_plot_gradient_histogram": (_st, [S, C.POINTER(Array), C.c_int]),
    "ts_npy_save": (_st, [S, C.POINTER(Array)]),
    # outfeed
    "ts_outfeed_new": (_st, [C.POINTER(P), C.POINTER(OutfeedConfig)]),
    "ts_outfeed_free": (None, [P]),
    "ts_outfeed_name": (S, [P]),
    "ts_outfeed_accepts": (C.c_int, [P, S]),
    "ts_outfeed_dequeue": (_st, [P, C.POINTER(OutfeedRecord), C.c_int]),
    "ts_outfeed_set_sink": (_st, [P, SINK_FN, C.c_void_p]),
    "ts_outfeed_get_counts": (OutfeedCounts, [P]),
    "ts_outfeed_flush": (_st, [P]),
    "ts_outfeed_add": (_st, [P, P, S, P]),
    "ts_options_outfeed_gradients": (_st, [P, P, C.c_int]),
    # diagnostics
    "ts_metrics_report": (C.c_void_p, []),
    "ts_metrics_reset": (None, []),
    "ts_counter_get": (C.c_int64, [S]),
    "ts_string_free": (None, [C.c_void_p]),
    # data
    "ts_dataset_load_mnist": (_st, [C.POINTER(P), S]),
    "ts_dataset_free": (None, [P]),
    "ts_dataset_size": (C.c_int64, [P]),
    "ts_dataset_arrays": (_st, [P, C.POINTER(Array), C.POINTER(Array)]),
    "ts_loader_new": (_st, [C.POINTER(P), P, LoaderConfig]),
    "ts_loader_free": (None, [P]),
    "ts_loader_batches": (C.c_int64, [P]),
    "ts_loader_next": (_st, [P, C.c_int, C.POINTER(Array), C.POINTER(Array)]),
    "ts_split": (_st, [P, P, C.c_int, C.c_int, C.POINTER(P)]),
    "ts_pad": (P, [P, P, C.POINTER(C.c_int64), C.c_int, C.c_float]),
    # ONNX import (may be missing from an older library: see `function`)
    "ts_graph_from_onnx": (_st, [C.POINTER(P), S, C.POINTER(OnnxInput), C.c_int]),
    "ts_graph_output_count": (C.c_size_t, [P]),
    "ts_graph_output_at": (P, [P, C.c_size_t]),
    "ts_tensor_onnx_type": (C.c_int, [P]),
    "ts_tensor_alias": (S, [P]),
    "ts_dataset_from_arrays": (_st, [C.POINTER(P), C.POINTER(Array), C.POINTER(Array)]),
}


def declare(name, restype, argtypes):
    """Sets a function's prototype if the library has it (False if not)."""
    f = getattr(lib, name, None)
    if f is None:
        return False
    f = getattr(f, "__wrapped__", f)  # declared before
    f.restype = restype
    f.argtypes = argtypes
    setattr(lib, name, _checking(f, argtypes))
    return True


for _name, (_res, _args) in _PROTOTYPES.items():
    declare(_name, _res, _args)


def function(name, what):
    """The C function `name`, or an UnsupportedError naming `what` when this
    build of the library does not have it. Called at use, never at import."""
    f = getattr(lib, name, None)
    if f is None:
        raise UnsupportedError(
            f"{what} needs {name}, which this libtensorscope ({lib.ts_version().decode()}) "
            "does not have; install a newer tensorscope")
    return f


# ----------------------------------------------------------------- errors


def last_error():
    return lib.ts_last_error().decode("utf-8", "replace")


def check(status):
    """Raises the exception of a non-zero ts_status with the library's message."""
    if status:
        raise error_for(status, last_error())


def checked_handle(ptr, what):
    """A handle returned by a function that gives NULL on failure."""
    if not ptr:
        raise InvalidArgumentError(last_error() or f"{what} failed")
    return ptr


def take_string(ptr, failure=OutOfMemoryError):
    """A library string that the caller frees (ts_string_free); NULL raises
    `failure` with the library's message."""
    if not ptr:
        raise failure(last_error() or "out of memory")
    try:
        return C.string_at(ptr).decode("utf-8", "replace")
    finally:
        lib.ts_string_free(ptr)


def cstr(s):
    return None if s is None else str(s).encode()


def as_dict(struct, skip=()):
    """A struct's fields as a dict (nested structs stay structs: skip them)."""
    return {n: getattr(struct, n) for n, _ in struct._fields_ if n not in skip}


def strings(ptr, n):
    return [ptr[i].decode() for i in range(n)]


# ------------------------------------------------------------ lifetimes


class Owned:
    """A library object's pointer, freed (by `free`) once it is released
    (its Python owner closed or collected) and nothing still points into
    it: numpy views of its memory and library objects made from it pin it
    (a model pins its graph and the queues it streams to). Any order of
    release and unpinning, the garbage collector's included, frees
    dependents before what they point into, once each.

    `deps` are Owned objects this one points into: pinned until it is freed.
    `keep`: Python objects the library calls while it lives (callbacks)."""

    __slots__ = ("ptr", "keep", "_free", "_deps", "_pins", "_released", "_lock")

    def __init__(self, ptr, free, deps=()):
        self.ptr = ptr
        self.keep = None
        self._free = free
        self._deps = []
        self._pins = 0
        self._released = False
        self._lock = threading.Lock()
        for d in deps:
            self.depend(d)

    def depend(self, other):
        """This object now points into `other`: it stays until this is freed."""
        other.pin()
        with self._lock:
            self._deps.append(other)

    def pin(self):
        with self._lock:
            if self.ptr is None:
                raise StateError("the library object was already freed")
            self._pins += 1

    def unpin(self):
        with self._lock:
            self._pins -= 1
        self._maybe_free()

    def release(self):
        """The owner is done with it: freed now, or when the last pin goes."""
        with self._lock:
            self._released = True
        self._maybe_free()

    def _maybe_free(self):
        with self._lock:
            if not self._released or self._pins > 0 or self.ptr is None:
                return
            ptr, self.ptr = self.ptr, None
            deps, self._deps = self._deps, []
        self._free(ptr)
        for d in deps:
            d.unpin()

    def __del__(self):
        if not sys.is_finalizing():
            self.release()


def release(owner):
    """An owner's __del__: its library object goes once nothing pins it."""
    owned = getattr(owner, "_owned", None)  # absent when __init__ failed
    if owned is not None and not sys.is_finalizing():
        owned.release()


class Pin:
    """Holds an Owned object's memory while it lives (a numpy view's base)."""

    def __init__(self, owned, array_interface=None):
        owned.pin()
        self._owned = owned
        if array_interface is not None:
            self.__array_interface__ = array_interface

    def __del__(self):
        owned = getattr(self, "_owned", None)
        if owned is not None and not sys.is_finalizing():
            self._owned = None
            owned.unpin()


# ----------------------------------------------------------------- arrays

DTYPES = [np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32), np.dtype(np.int64),
          np.dtype(np.uint8), np.dtype(np.bool_), np.dtype(np.int8), np.dtype(np.int16),
          np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64),
          np.dtype(np.uint16), np.dtype(np.float16)]  # index = ts_dtype (bf16: its bits, as uint16)
TS_F32, TS_BF16, TS_F16 = 0, 11, 12
try:  # ml_dtypes' bfloat16 (JAX's, TensorFlow's, ONNX's) where it is installed: bf16 in and out
    import ml_dtypes as _ml_dtypes
    DTYPES[TS_BF16] = np.dtype(_ml_dtypes.bfloat16)
except ImportError:
    pass
# ONNX's low-precision types (ONNX type number: ml_dtypes' dtype name), which
# tensorscope holds in f32 on their grid: arrays of them are read as their
# exact f32 values, and outputs an ONNX import declares of them come back in
# that dtype (ml_dtypes imported then).
LOWBITS = {17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2", 20: "float8_e5m2fnuz",
           21: "uint4", 22: "int4", 23: "float4_e2m1fn", 24: "float8_e8m0fnu", 25: "uint2", 26: "int2"}
_LOWBITS_NAMES = set(LOWBITS.values())


def lowbits_dtype(onnx_type):
    """ml_dtypes' dtype of ONNX low-precision type `onnx_type`."""
    try:
        import ml_dtypes
    except ImportError as e:
        raise ImportError(f"an output of ONNX type {LOWBITS[onnx_type]} is returned as ml_dtypes."
                          f"{LOWBITS[onnx_type]}: pip install ml_dtypes") from e
    return np.dtype(getattr(ml_dtypes, LOWBITS[onnx_type]))


_DTYPE_CODE = {}
for _i, _d in enumerate(DTYPES):
    _DTYPE_CODE.setdefault(_d, _i)  # uint16 data is u16; bf16 as bits is given as ts.bf16(bits)


class bf16:
    """bf16 data for an input, given as its bit patterns: `ts.bf16(bits)`
    with `bits` a uint16 array (the top half of each value's f32 bits);
    read as the exact f32 values. An ml_dtypes.bfloat16 array needs no
    wrapper."""

    def __init__(self, bits):
        bits = np.asarray(bits)
        if bits.dtype != np.uint16:
            raise TypeError(f"ts.bf16 takes the bit patterns as a uint16 array, got {bits.dtype} "
                            "(from f32 values x: (x.view(np.uint32) >> 16).astype(np.uint16) truncates; "
                            "ml_dtypes' x.astype(ml_dtypes.bfloat16) rounds)")
        self.bits = bits
        self.shape = bits.shape
        self.dtype = "bf16"

    def __repr__(self):
        return f"ts.bf16(shape={self.shape})"



def to_c(a, what):
    """A ts_array viewing numpy array `a` (no copy when it is C-contiguous).
    Returns (ts_array, the array it views: keep it alive while C reads it)."""
    if hasattr(a, "detach") and hasattr(a, "numpy"):  # a torch tensor
        a = a.detach().cpu().numpy()
    if isinstance(a, bf16):
        a, code = a.bits, TS_BF16
    else:
        a = np.asarray(a)
        if a.dtype.name in _LOWBITS_NAMES:  # ml_dtypes' float8, float4, int4, int2: exact in f32
            a = a.astype(np.float32)
        code = _DTYPE_CODE.get(a.dtype)
    if code is None:
        names = ", ".join(str(d) for d in DTYPES)
        raise TypeError(f"{what}: numpy dtype {a.dtype} has no tensorscope dtype; "
                        f"use one of {names}, ts.bf16(uint16 bits) (e.g. {what}.astype(np.float32))")
    if a.ndim > TS_MAX_DIMS:
        raise ValueError(f"{what}: {a.ndim} dimensions; tensorscope arrays have at most "
                         f"{TS_MAX_DIMS}")
    a = np.ascontiguousarray(a)
    arr = Array(code, a.ndim)
    arr.shape[:a.ndim] = a.shape
    arr.data = a.ctypes.data if a.size else None
    return arr, a


def shape_of(arr):
    return tuple(arr.shape[i] for i in range(arr.ndim))


def shape_str(arr):
    """The library's "f32[4,100]"."""
    buf = C.create_string_buffer(128)
    return lib.ts_array_shape_str(C.byref(arr), buf, len(buf)).decode()


def to_numpy(arr, what="array"):
    """A numpy copy of a ts_array (the library's buffer may be reused after)."""
    dtype = DTYPES[arr.dtype]
    shape = shape_of(arr)
    out = np.empty(shape, dtype)
    if out.size:
        if not arr.data:
            raise StateError(f"{what}: the library returned no data")
        C.memmove(out.ctypes.data, arr.data, out.nbytes)
    return out
