"""Device arrays (CuPy, PyTorch, anything with __cuda_array_interface__): their pointers go
to the library with MF_MEMORY_DEVICE. Dense arrays already in the C types (float32 or int32,
C-contiguous) are used in place; others are converted on the device by their own library.
(Sparse matrices: the library reads them into its host-resident canonical form.)

Streams: the library works on its context's stream. Before a call, the array library's
current stream is synchronized (its pending writes to the inputs are done); after a
stream-ordered call (sddmm, spmm), the context's stream is (the result is there), so the
arrays behave as the caller's library expects."""
import ctypes

import numpy as np


def has_cai(x):
    """Whether x is a dense device array. PyTorch tensors are asked directly: its sparse ones
    and those that require grad raise on the attribute."""
    if _module(x) == "torch":
        return bool(getattr(x, "is_cuda", False)) and not (
            getattr(x, "is_sparse", False) or getattr(x, "is_sparse_csr", False))
    try:
        return hasattr(x, "__cuda_array_interface__")
    except Exception:
        return False


def is_sparse(x):
    return _is_torch_sparse_cuda(x) or _is_cupy_sparse(x)


def is_device(x):
    return is_sparse(x) or has_cai(x)


def _module(x):
    return type(x).__module__.split(".")[0]


def _is_torch_sparse_cuda(x):
    return _module(x) == "torch" and getattr(x, "is_cuda", False) and \
        (getattr(x, "is_sparse_csr", False) or getattr(x, "is_sparse", False))


def _is_cupy_sparse(x):
    if _module(x) not in ("cupyx", "cupy"):
        return False
    try:
        import cupyx.scipy.sparse as csp
    except ImportError:
        return False
    return csp.issparse(x)


class Framework:
    """What the library of a device array offers: conversion, allocation, streams."""

    def __init__(self, x):
        self.name = _module(x)
        if self.name == "cupyx":
            self.name = "cupy"
        if self.name == "torch":
            import torch
            self.torch = torch
            self.device = x.device
        elif self.name == "cupy":
            import cupy
            self.cupy = cupy
        else:
            raise NotImplementedError(f"mfact: device arrays of {self.name} are not supported "
                                      "(CuPy and PyTorch are)")

    def _torch_dtype(self, dtype):
        name = {np.float32: "float32", np.int32: "int32", np.int64: "int64"}[dtype]
        return getattr(self.torch, name)

    def convert(self, x, dtype):
        """x as a C-contiguous device array of dtype: x itself when it already is."""
        if self.name == "torch":
            t = self._torch_dtype(dtype)
            x = x.detach()
            return x if x.dtype == t and x.is_contiguous() else x.to(t).contiguous()
        if x.dtype == dtype and x.flags.c_contiguous:
            return x
        return self.cupy.ascontiguousarray(x, dtype=dtype)

    def is_c(self, x, dtype):
        """Whether x already is a C-contiguous array of dtype (usable as it is)."""
        if self.name == "torch":
            return x.dtype == self._torch_dtype(dtype) and x.is_contiguous()
        return x.dtype == dtype and x.flags.c_contiguous

    def _alloc(self, kind, shape, dtype):
        if self.name == "torch":
            return getattr(self.torch, kind)(shape, dtype=self._torch_dtype(dtype),
                                             device=self.device)
        return getattr(self.cupy, kind)(shape, dtype=dtype)

    def zeros(self, shape, dtype):
        return self._alloc("zeros", shape, dtype)

    def empty(self, shape, dtype):
        """For outputs the library writes whole."""
        return self._alloc("empty", shape, dtype)

    def asarray(self, host, dtype):
        if self.name == "torch":
            return self.convert(self.torch.as_tensor(np.asarray(host), device=self.device),
                                dtype)
        return self.cupy.asarray(np.asarray(host), dtype=dtype)

    def sync_current(self):
        if self.name == "torch":
            self.torch.cuda.current_stream(self.device).synchronize()
        else:
            self.cupy.cuda.get_current_stream().synchronize()

    def sync_stream(self, handle):
        if not handle:
            return
        if self.name == "torch":
            self.torch.cuda.ExternalStream(handle, device=self.device).synchronize()
        else:
            self.cupy.cuda.runtime.streamSynchronize(handle)


def pointer(x):
    """The device pointer of a C-contiguous device array."""
    if _module(x) == "torch":
        return ctypes.c_void_p(x.data_ptr())
    return ctypes.c_void_p(x.__cuda_array_interface__["data"][0])


def sparse_parts(x):
    """(framework, rows, cols, format, a, b, values): CSR (indptr, indices) or COO (row,
    col) arrays of a CuPy or PyTorch sparse matrix on the device."""
    fw = Framework(x)
    if fw.name == "torch":
        if getattr(x, "is_sparse_csr", False):
            return (fw, x.shape[0], x.shape[1], "csr", x.crow_indices(), x.col_indices(),
                    x.values())
        x = x.coalesce()
        idx = x.indices()
        return fw, x.shape[0], x.shape[1], "coo", idx[0], idx[1], x.values()
    if x.format == "coo":
        return fw, x.shape[0], x.shape[1], "coo", x.row, x.col, x.data
    x = x.tocsr()
    return fw, x.shape[0], x.shape[1], "csr", x.indptr, x.indices, x.data
