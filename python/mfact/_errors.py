"""mf_status as Python exceptions, each carrying the context's last error message."""
from . import _lib


class Error(Exception):
    """Base of every mfact error; `status` is the mf_status value."""

    status = None


class InvalidArgument(Error, ValueError):
    status = 1


class InvalidData(Error, ValueError):
    status = 2


class OutOfMemory(Error, MemoryError):
    status = 3


class NoDevice(Error, RuntimeError):
    status = 4


class Unsupported(Error, NotImplementedError):
    status = 5


class CudaError(Error, RuntimeError):
    status = 6


class FileError(Error, OSError):
    status = 7


class Cancelled(Error):
    status = 8


class NumericError(Error, ArithmeticError):
    status = 9


class InternalError(Error, RuntimeError):
    status = 10


_BY_STATUS = {c.status: c for c in (InvalidArgument, InvalidData, OutOfMemory, NoDevice,
                                    Unsupported, CudaError, FileError, Cancelled, NumericError,
                                    InternalError)}


def check(status, ctx_handle, what=""):
    """Raise the exception of a failed mf_status with the context's message."""
    if status == 0:
        return
    # A failure without a context (mf_ctx_create's) leaves its message under NULL.
    raw = _lib.mf_ctx_last_error(ctx_handle or None)
    message = raw.decode("utf-8", "replace") if raw else None
    if message == "no error":
        message = None
    if not message:  # the library names the call in its messages; say it here otherwise
        message = _lib.mf_status_string(status).decode()
        if what:
            message = f"{what}: {message}"
    cls = _BY_STATUS.get(status, Error)
    err = cls(message)
    err.status = status
    raise err
