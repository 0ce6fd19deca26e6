"""Exceptions: one class per status code of the C library, each carrying the
library's message for the failed call (``infs_error_last``)."""

from __future__ import annotations

from typing import Dict, Type

__all__ = [
    "InferscaleError", "InvalidArgumentError", "OutOfMemoryError", "IOFailureError",
    "NotFoundError", "MismatchError", "CorruptError", "BusyError", "RangeError",
    "UnsupportedError", "DeviceError", "ExistsError", "FormatError", "BudgetError",
    "CanceledError", "ReadOnlyError", "NotResidentError", "error_class",
]


class InferscaleError(Exception):
    """Base class of every error raised by the C library.

    ``code`` is the negative ``infs_status`` value, ``message`` the library's
    message for the call that failed.
    """

    code: int = 0

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        return self.message


class InvalidArgumentError(InferscaleError, ValueError):
    """INFS_EINVAL: an argument is NULL, malformed or inconsistent."""
    code = -1


class OutOfMemoryError(InferscaleError, MemoryError):
    """INFS_ENOMEM: host memory allocation failed."""
    code = -2


class IOFailureError(InferscaleError, OSError):
    """INFS_EIO: a read, write, fsync or mmap failed."""
    code = -3


class NotFoundError(InferscaleError, LookupError):
    """INFS_ENOTFOUND: no such fact, namespace or file."""
    code = -4


class MismatchError(InferscaleError, ValueError):
    """INFS_EMISMATCH: geometry or identity differs from the store's."""
    code = -5


class CorruptError(InferscaleError):
    """INFS_ECORRUPT: a file failed its checksum or structure checks."""
    code = -6


class BusyError(InferscaleError):
    """INFS_EBUSY: another process (or handle) holds the store for writing."""
    code = -7


class RangeError(InferscaleError, ValueError):
    """INFS_ERANGE: a position, block id, k or size is out of range."""
    code = -8


class UnsupportedError(InferscaleError):
    """INFS_EUNSUPPORTED: not built in, or not supported for this input."""
    code = -9


class DeviceError(InferscaleError):
    """INFS_EDEVICE: a CUDA or cuBLAS call failed."""
    code = -10


class ExistsError(InferscaleError):
    """INFS_EEXISTS: the object already exists."""
    code = -11


class FormatError(InferscaleError, ValueError):
    """INFS_EFORMAT: a model or data file is not in the expected format."""
    code = -12


class BudgetError(InferscaleError):
    """INFS_EBUDGET: a configured memory budget would be exceeded."""
    code = -13


class CanceledError(InferscaleError):
    """INFS_ECANCELED: a callback asked to stop."""
    code = -14


class ReadOnlyError(InferscaleError):
    """INFS_EREADONLY: the store was opened read-only."""
    code = -15


class NotResidentError(InferscaleError):
    """INFS_ENOTRESIDENT: a fact's KV is in no memory the call can read (Store.prefetch)."""
    code = -16


_BY_CODE: Dict[int, Type[InferscaleError]] = {
    cls.code: cls for cls in (
        InvalidArgumentError, OutOfMemoryError, IOFailureError, NotFoundError, MismatchError,
        CorruptError, BusyError, RangeError, UnsupportedError, DeviceError, ExistsError,
        FormatError, BudgetError, CanceledError, ReadOnlyError, NotResidentError)
}


def error_class(code: int) -> Type[InferscaleError]:
    """The exception class of a status code (InferscaleError for a code this
    version of the binding does not know)."""
    return _BY_CODE.get(code, InferscaleError)
