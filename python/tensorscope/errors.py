"""Exceptions: one class per ts_status, each carrying the library's message.

Every class derives from TensorscopeError and from the built-in exception a
Python user would catch for that kind of failure (ValueError for a bad value
or shape, LookupError for an unknown name, OSError for a file, ...)."""


class TensorscopeError(Exception):
    """A failure reported by the library. `status` is its ts_status name
    (e.g. "TS_ERR_SHAPE"); str(e) is the library's message."""

    status = "TS_ERR"

    def __init__(self, message, status=None):
        super().__init__(message)
        if status:
            self.status = status


class InvalidArgumentError(TensorscopeError, ValueError):
    status = "TS_ERR_INVALID_ARGUMENT"


class OutOfMemoryError(TensorscopeError, MemoryError):
    status = "TS_ERR_OUT_OF_MEMORY"


class FileError(TensorscopeError, OSError):
    status = "TS_ERR_IO"

    def __str__(self):  # OSError would print its args tuple
        return self.args[0] if self.args else ""


class FormatError(TensorscopeError, ValueError):
    status = "TS_ERR_FORMAT"


class ShapeError(TensorscopeError, ValueError):
    status = "TS_ERR_SHAPE"


class NotFoundError(TensorscopeError, LookupError):
    status = "TS_ERR_NOT_FOUND"


class StateError(TensorscopeError, RuntimeError):
    status = "TS_ERR_STATE"


class NumericsError(TensorscopeError, FloatingPointError):
    """A numeric check found NaN or Inf; `tensor` names the first one."""

    status = "TS_ERR_NUMERICS"
    tensor = None


class UnsupportedError(TensorscopeError, NotImplementedError):
    status = "TS_ERR_UNSUPPORTED"


class InternalError(TensorscopeError, RuntimeError):
    status = "TS_ERR_INTERNAL"


# index = ts_status value
_BY_STATUS = [None, InvalidArgumentError, OutOfMemoryError, FileError, FormatError, ShapeError,
              NotFoundError, StateError, NumericsError, UnsupportedError, InternalError]


def error_for(status, message, status_name=None):
    cls = _BY_STATUS[status] if 0 < status < len(_BY_STATUS) else TensorscopeError
    return cls(message, status_name)
