"""The library's kernels and readers as functions: read, sddmm, spmm."""
import ctypes
import os

import numpy as np

from . import _lib
from ._arrays import Matrix, as_c, as_matrix, ptr
from ._context import resolve
from ._errors import check

_FORMATS = {"auto": 0, "mtx": 1, "triplets": 2, "pairs": 3, "bin": 4}


def read(path, format="auto", index_base=-1, shape=None, pattern=False, ctx=None):
    """A matrix file (MatrixMarket, triplets such as MovieLens, pairs, packed binary
    triplets: docs/formats.md) as a scipy.sparse.csr_matrix of float32, through the C
    readers (a malformed line is a ValueError naming the file and the line)."""
    ctx = resolve(ctx)
    if format not in _FORMATS:
        raise ValueError(f"mfact.read: format must be one of {sorted(_FORMATS)}, not {format!r}")
    o = _lib.ReadOpts()
    _lib.mf_read_opts_init(ctypes.byref(o))
    o.format = _FORMATS[format]
    o.index_base = int(index_base)
    if shape is not None:
        o.rows, o.cols = (int(s) for s in shape)
    if pattern:
        o.flags |= _lib.SPARSE_PATTERN
    out = ctypes.c_void_p()
    check(_lib.mf_sparse_read(ctx.handle, ctypes.byref(out), os.fsencode(path),
                              ctypes.byref(o)), ctx.handle, "mfact.read")
    m = Matrix.__new__(Matrix)
    m.ctx, m._handle = ctx, out.value
    rows, cols, nnz = ctypes.c_int32(), ctypes.c_int32(), ctypes.c_int64()
    check(_lib.mf_sparse_shape(m._handle, ctypes.byref(rows), ctypes.byref(cols),
                               ctypes.byref(nnz)), ctx.handle)
    m.shape, m.nnz = (rows.value, cols.value), nnz.value
    try:
        return m.to_scipy()
    finally:
        m.close()


def _factor(a, rows, name):
    a = as_c(a, np.float32, name)
    if a.ndim != 2 or a.shape[0] != rows:
        raise ValueError(f"mfact: {name} must be {rows} x k, not {a.shape}")
    return a


def sddmm(S, A, B, alpha=1.0, beta=0.0, out=None, pattern=False, ctx=None):
    """out[p] = alpha * S_ij * dot(A[i], B[j]) + beta * out[p] for each stored entry p of S
    (canonical order: row-major, columns ascending), as a float32 array of S.nnz. A float32
    C-contiguous `out` is written in place."""
    ctx = resolve(ctx)
    M = as_matrix(S, ctx)
    A = _factor(A, M.shape[0], "A")
    B = _factor(B, M.shape[1], "B")
    if A.shape[1] != B.shape[1]:
        raise ValueError(f"mfact.sddmm: A has {A.shape[1]} columns and B {B.shape[1]}")
    if out is None:
        if beta != 0.0:
            raise ValueError("mfact.sddmm: beta != 0 needs out")
        out = np.empty(M.nnz, np.float32)
    elif not (isinstance(out, np.ndarray) and out.dtype == np.float32 and
              out.flags["C_CONTIGUOUS"] and out.shape == (M.nnz,)):
        raise ValueError(f"mfact.sddmm: out must be a C-contiguous float32 array of {M.nnz}")
    check(_lib.mf_sddmm(ctx.handle, M.handle, A.shape[1], ptr(A), A.shape[1], ptr(B),
                        B.shape[1], float(alpha), float(beta), ptr(out), _lib.MEMORY_HOST,
                        1 if pattern else 0), ctx.handle, "mfact.sddmm")
    return out


def spmm(S, X, alpha=1.0, transpose=False, ctx=None):
    """alpha * op(S) @ X as a float32 array (op(S): S, or its transpose)."""
    ctx = resolve(ctx)
    M = as_matrix(S, ctx)
    p, q = M.shape[::-1] if transpose else M.shape
    X = as_c(X, np.float32, "X")
    if X.ndim != 2 or X.shape[0] != q:
        raise ValueError(f"mfact.spmm: X must have {q} rows, not shape {X.shape}")
    n = X.shape[1]
    Y = np.empty((p, n), np.float32)
    check(_lib.mf_spmm(ctx.handle, 1 if transpose else 0, M.handle, n, float(alpha), ptr(X), n,
                       0.0, ptr(Y), n, _lib.MEMORY_HOST), ctx.handle, "mfact.spmm")
    return Y
