"""Python data to what the C API takes: scipy.sparse matrices to mf_sparse, arrays to
pointers. Inputs already in the C types (float32, int32 indices, C-contiguous) are passed
as they are, never copied."""
import ctypes

import numpy as np
import scipy.sparse as sp

from . import _device, _lib
from ._errors import check
from ._ints import INT32_MAX as _INT32_MAX, RangeError


class Matrix:
    """An mf_sparse owned by Python (freed with the object). `mfact.read` returns SciPy
    matrices; this type is what the calls build from them, reusable to skip the rebuild
    (`mfact.Matrix(ratings)`): the library caches device copies and plans on it."""

    def __init__(self, data, ctx=None, pattern=False, sum_duplicates=False):
        from ._context import resolve
        self.ctx = resolve(ctx)
        self._handle = None
        with self.ctx.lock:
            self._handle = _build(self.ctx, data, pattern, sum_duplicates)
            # A rank's part of a split file (mfact.read(part=...)) stays one on the C side.
            if getattr(data, "part", None) is not None and _lib.mf_sparse_set_part is not None:
                check(_lib.mf_sparse_set_part(self._handle, 1), self.ctx.handle, "mfact")
        self.ctx._own(self)
        # Where a fit on this matrix puts its results: the device of its arrays, or the host.
        self.framework = _device.Framework(data) if _device.is_device(data) else None
        self.shape, self.nnz = shape_of(self.ctx, self._handle)

    @property
    def handle(self):
        if self._handle is None:
            raise ValueError("mfact.Matrix: the matrix is closed (or its Context is)")
        self.ctx.handle  # raises when the context is closed
        return self._handle

    def to_scipy(self):
        """The stored entries as a scipy.sparse.csr_matrix (canonical order)."""
        with self.ctx.lock:
            return to_scipy(self.ctx, self.handle, self.shape, self.nnz)

    def close(self):
        """Free the matrix (before its context: Context.close sees to it). While a call on
        its context runs, which may be reading it (closed from that call's progress
        callback, or from another thread), it is freed when that call ends."""
        if getattr(self, "_handle", None) is None:
            return
        lock = self.ctx.lock
        handle = lock.claim(self)  # once, whichever thread gets here first
        if handle is None:
            return
        # Destroyed when the outermost call on the context ends: at once (the release
        # below) unless a call is running, on this thread or another.
        lock.defer(handle)
        if lock.acquire(blocking=False):
            lock.release()

    # One handle, one owner: a copy is the same matrix (as a Context's is), and pickling
    # one would copy a pointer.
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        raise TypeError("mfact.Matrix cannot be pickled (it holds the library's handle); "
                        "pickle Matrix.to_scipy() and build a Matrix from it")

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        return f"mfact.Matrix({self.shape[0]} x {self.shape[1]}, nnz={self.nnz})"


def shape_of(ctx, handle):
    """((rows, cols), nnz) of an mf_sparse."""
    rows, cols, nnz = ctypes.c_int32(), ctypes.c_int32(), ctypes.c_int64()
    check(_lib.mf_sparse_shape(handle, ctypes.byref(rows), ctypes.byref(cols),
                               ctypes.byref(nnz)), ctx.handle)
    return (rows.value, cols.value), nnz.value


def as_matrix(data, ctx, pattern=False):
    """A Matrix for data, or data itself when it already is one of this context."""
    if isinstance(data, Matrix):
        if data.ctx is not ctx:
            raise ValueError("mfact: the Matrix belongs to another Context")
        return data
    return Matrix(data, ctx, pattern=pattern)


def as_c(array, dtype, name):
    """array as a C-contiguous numpy array of dtype: the same object when it already is."""
    if _device.is_device(array):
        raise ValueError(f"mfact: {name} is a device array where host memory is needed")
    a = np.asarray(array)
    if a.dtype.kind == "c":  # NumPy would drop the imaginary part with only a warning
        raise TypeError(f"mfact: {name} are complex ({a.dtype}): mfact takes real numbers")
    if a.dtype != dtype or not a.flags["C_CONTIGUOUS"]:
        a = np.ascontiguousarray(a, dtype=dtype)
    return a


def ptr(a):
    """The array's data pointer (NumPy gives even an empty array a valid one; a device
    array's from __cuda_array_interface__), or NULL for None."""
    if a is None:
        return None
    if _device.has_cai(a):
        return _device.pointer(a)
    return ctypes.c_void_p(a.ctypes.data)


def on_device(a, fw, dtype, name):
    """a in device memory of framework fw, as dtype, C-contiguous (a itself when it is)."""
    if _device.is_device(a):
        return fw.convert(a, dtype)
    return fw.asarray(np.asarray(a), dtype)


def on_device_any(a, fw):
    """Index array a on the device of fw: host indices checked (integers that fit int32)
    and moved; device ones must be integers (their range is _device_index's to check)."""
    if _device.is_device(a):
        kind = str(a.dtype)
        if "int" not in kind:
            raise TypeError(f"mfact: indices must be integers, not {kind}")
        return a
    return fw.asarray(_checked_index(a, "int32 indices", "indices"), np.int32)


def _checked_index(a, bound, name):
    """Indices as int32, refusing what int32 cannot hold (the library checks the rest and
    names the offending entry)."""
    a = np.asarray(a)
    if a.size == 0 and a.dtype.kind == "f":  # [] is float64 to NumPy: no index to check
        a = a.astype(np.int32)
    if a.dtype.kind not in "iu":
        raise TypeError(f"mfact: {name} must be integers, not {a.dtype}")
    if a.size and (a.max() > _INT32_MAX or (a.dtype.kind == "i" and a.min() < -2**31)):
        raise RangeError(f"mfact: {name} holds an index past {_INT32_MAX}: the matrix "
                         f"has {bound}")
    return as_c(a, np.int32, name)


def _shape(rows, cols):
    if not (0 < rows <= _INT32_MAX and 0 < cols <= _INT32_MAX):
        raise RangeError(f"mfact: a matrix of {rows} x {cols}: both sides must be "
                         f"1..{_INT32_MAX}")
    return int(rows), int(cols)


def _length(x):
    """The length of a sparse matrix's index or value array, which must be 1-D."""
    shape = tuple(x.shape)
    if len(shape) != 1:
        raise ValueError(f"mfact: a sparse matrix's index and value arrays must be 1-D, not "
                         f"of shape {shape}")
    return int(shape[0])


def _check_lengths(fmt, rows, nnz, a, b, v):
    """The library reads rows + 1 offsets (CSR) or nnz row indices (COO), nnz column
    indices and nnz values (v None: a pattern) through bare pointers: arrays shorter than
    that (SciPy checks them only when a matrix is built, not after its arrays are replaced)
    would be read past their ends. nnz None: CSR's last offset. Returns nnz."""
    if fmt == "csr" and _length(a) != rows + 1:
        raise ValueError(f"mfact: indptr holds {_length(a)} offsets for {rows} rows (CSR "
                         f"needs rows + 1)")
    if nnz is None:
        nnz = int(a[-1])
    if nnz < 0:
        raise ValueError(f"mfact: a sparse matrix with nnz = {nnz}")
    if fmt == "coo" and _length(a) < nnz:
        raise ValueError(f"mfact: {_length(a)} row indices for {nnz} entries")
    if _length(b) < nnz:
        raise ValueError(f"mfact: {_length(b)} column indices for {nnz} entries")
    if v is not None and _length(v) < nnz:
        raise ValueError(f"mfact: {_length(v)} values for {nnz} entries")
    return nnz


def _build(ctx, data, pattern, sum_duplicates):
    flags = (_lib.SPARSE_PATTERN if pattern else 0) | \
        (_lib.SPARSE_SUM_DUPLICATES if sum_duplicates else 0)
    if _device.is_device(data):
        return _build_device(ctx, data, pattern, flags)
    if not sp.issparse(data):
        dense = np.asarray(data)
        if dense.ndim != 2:
            raise ValueError(f"mfact: a matrix must be 2-D, not {dense.ndim}-D")
        data = sp.csr_matrix(dense)
    out = ctypes.c_void_p()
    if data.format == "coo":
        # COO goes in as it is, so that the library sees (and names) repeated entries
        # instead of SciPy summing them.
        rows, cols = _shape(*data.shape)
        _check_lengths("coo", rows, data.nnz, data.row, data.col, None if pattern else data.data)
        r = _checked_index(data.row, f"{rows} rows", "row indices")
        c = _checked_index(data.col, f"{cols} columns", "column indices")
        v = None if pattern else as_c(data.data, np.float32, "values")
        status = _lib.mf_sparse_from_coo(ctx.handle, ctypes.byref(out), rows, cols, data.nnz,
                                         ptr(r), ptr(c), ptr(v), _lib.MEMORY_HOST, flags)
    else:
        csr = data.tocsr()
        rows, cols = _shape(*csr.shape)
        nnz = _check_lengths("csr", rows, None, csr.indptr, csr.indices,
                             None if pattern else csr.data)
        indptr = as_c(csr.indptr, np.int64, "indptr")
        c = _checked_index(csr.indices, f"{cols} columns", "column indices")
        v = None if pattern else as_c(csr.data, np.float32, "values")
        status = _lib.mf_sparse_from_csr(ctx.handle, ctypes.byref(out), rows, cols, nnz,
                                         ptr(indptr), ptr(c), ptr(v), _lib.MEMORY_HOST, flags)
    check(status, ctx.handle, "mfact")
    return out.value


def _device_index(fw, a, name):
    """Device indices as int32, refusing what int32 cannot hold (a sync for the max, only
    when they are wider)."""
    if fw.name == "torch":
        wide = a.dtype != fw.torch.int32 and a.numel() > 0
    else:
        wide = a.dtype != np.int32 and a.size > 0
    if wide and (int(a.max()) > _INT32_MAX or int(a.min()) < -2**31):
        raise RangeError(f"mfact: {name} holds an index outside int32")
    return fw.convert(a, np.int32)


def _build_device(ctx, data, pattern, flags):
    """A CuPy or PyTorch matrix (sparse, or dense: its nonzeros) in place on the device."""
    if not _device.is_sparse(data):  # dense: its nonzeros are the entries
        fw = _device.Framework(data)
        if len(data.shape) != 2:
            raise ValueError(f"mfact: a matrix must be 2-D, not {len(data.shape)}-D")
        if fw.name == "torch":
            data = data.detach().to_sparse_csr()
        else:
            import cupyx.scipy.sparse as csp
            data = csp.csr_matrix(data)
    fw, rows, cols, fmt, a, b, v = _device.sparse_parts(data)
    rows, cols = _shape(rows, cols)
    nnz = _check_lengths(fmt, rows, _length(v), a, b, v)
    c = _device_index(fw, b, "column indices")
    val = None if pattern else fw.convert(v, np.float32)
    out = ctypes.c_void_p()
    fw.sync_current()
    if fmt == "coo":
        r = _device_index(fw, a, "row indices")
        fw.sync_current()
        status = _lib.mf_sparse_from_coo(ctx.handle, ctypes.byref(out), rows, cols, nnz, ptr(r),
                                         ptr(c), ptr(val), _lib.MEMORY_DEVICE, flags)
    else:
        indptr = fw.convert(a, np.int64)
        fw.sync_current()
        status = _lib.mf_sparse_from_csr(ctx.handle, ctypes.byref(out), rows, cols, nnz,
                                         ptr(indptr), ptr(c), ptr(val), _lib.MEMORY_DEVICE,
                                         flags)
    check(status, ctx.handle, "mfact")
    return out.value


def to_scipy(ctx, handle, shape, nnz):
    indptr = np.empty(shape[0] + 1, np.int64)
    indices = np.empty(max(nnz, 1), np.int32)
    values = np.empty(max(nnz, 1), np.float32)
    check(_lib.mf_sparse_get_csr(handle, ptr(indptr), ptr(indices), ptr(values),
                                 _lib.MEMORY_HOST), ctx.handle, "mfact")
    return sp.csr_matrix((values[:nnz], indices[:nnz], indptr), shape=shape)
