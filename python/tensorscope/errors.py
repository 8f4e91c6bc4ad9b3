"""Exceptions: one class per ts_status, each carrying the library's message.

Every class derives from TensorscopeError and from the built-in exception a
Python user would catch for that kind of failure (ValueError for a bad value
or shape, LookupError for an unknown name, OSError for a file, ...)."""


class TensorscopeError(Exception):
    """A failure reported by the library: str(e) is its message, e.status
    the ts_status name ("TS_ERR_SHAPE")."""

    @property
    def status(self):
        from ._capi import lib
        if type(self) not in _BY_STATUS:
            return "TS_ERR"
        return lib.ts_status_name(_BY_STATUS.index(type(self)) + 1).decode()

    def __str__(self):  # OSError would print its args tuple
        return self.args[0] if self.args else ""


class InvalidArgumentError(TensorscopeError, ValueError):
    """A bad value, name or option."""


class OutOfMemoryError(TensorscopeError, MemoryError):
    """The allocator said no."""


class FileError(TensorscopeError, OSError):
    """A file could not be opened, read or written."""


class FormatError(TensorscopeError, ValueError):
    """A file's contents are corrupt or truncated."""


class ShapeError(TensorscopeError, ValueError):
    """Shapes do not fit the op."""


class NotFoundError(TensorscopeError, LookupError):
    """An unknown tensor, anchor or key name."""


class StateError(TensorscopeError, RuntimeError):
    """Called at the wrong time (e.g. before compile)."""


class NumericsError(TensorscopeError, FloatingPointError):
    """A numeric check found NaN or Inf; `tensor` names the first one and
    `report` is the library's whole report."""

    tensor = None
    report = None


class UnsupportedError(TensorscopeError, NotImplementedError):
    """A feature not built in."""


class InternalError(TensorscopeError, RuntimeError):
    """A bug in tensorscope: please report it."""


class DistError(TensorscopeError, RuntimeError):
    """Another rank of the MPI job died, hung or disagrees (replicas, stages)."""


class CancelledError(TensorscopeError, RuntimeError):
    """Model.cancel() stopped the run: what it computed is kept (the
    message says how far it got)."""


class SpikeError(TensorscopeError, RuntimeError):
    """The spike detector (Options.detect_spikes, action "stop", "npz" or
    "inspect") stopped the call before a step's update; Model.spike() says
    which signal of which tensor crossed first."""


# in ts_status order, from TS_ERR_INVALID_ARGUMENT = 1
_BY_STATUS = [InvalidArgumentError, OutOfMemoryError, FileError, FormatError, ShapeError,
              NotFoundError, StateError, NumericsError, UnsupportedError, InternalError,
              DistError, CancelledError, SpikeError]


def numerics_error(report, tensor, logged):
    """The NumericsError of a run the numeric check stopped. When the
    library has logged the report (`logged`: logs at error or above), the
    message is its first line and says where the rest is, so the report
    shows once; e.report holds all of it either way."""
    first, _, rest = report.partition("\n")
    e = NumericsError(f"{first}\n  (the rest of the report is in the log above; all of it in this exception's "
                      ".report)" if logged and rest else report)
    e.tensor, e.report = tensor, report
    return e


def error_for(status, message):
    """The exception of a non-zero ts_status."""
    cls = _BY_STATUS[status - 1] if 1 <= status <= len(_BY_STATUS) else TensorscopeError
    return cls(message)
