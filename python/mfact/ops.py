"""The library's kernels and readers as functions: read, sddmm, spmm."""
import ctypes

import numpy as np

from . import _ids, _device, _lib
from ._arrays import as_c, as_matrix, on_device, ptr, shape_of, to_scipy
from ._context import resolve
from ._errors import Unsupported, check
from ._ints import INT32, INT32_MAX, to_c
from ._text import c_path, c_text

_FORMATS = {"auto": 0, "mtx": 1, "triplets": 2, "pairs": 3, "bin": 4}


def _column(o, role, col):
    """user_col/item_col/rating_col: a header name (str) or a 0-based position (int)."""
    if col is None:
        return None
    if isinstance(col, str):
        name = c_text(col, f"mfact.read: {role}_col")
        setattr(o, role + "_column", name)
        return name
    setattr(o, role + "_field", to_c(col, f"mfact.read: {role} column", INT32, 0, 255) + 1)
    return None


def _pair(value, name, form):
    """value's two items, or mfact.read's ValueError naming the argument."""
    try:
        first, second = value
    except (TypeError, ValueError):
        raise ValueError(f"mfact.read: {name} must be {form}, not {value!r}") from None
    return first, second


def read(path, format="auto", index_base=-1, shape=None, pattern=False, ctx=None,
         user_col=None, item_col=None, rating_col=None, ids=False, id_maps=None, part=None):
    """A matrix file (MatrixMarket, triplets such as MovieLens, pairs, packed binary
    triplets: docs/formats.md) as a scipy.sparse.csr_matrix of float32, through the C
    readers (a malformed line is a ValueError naming the file and the line).

    Ids as users have them: with user_col, item_col, rating_col (a header name, or a
    0-based position as pandas counts) or ids=True (columns 0, 1, 2), a CSV/TSV whose
    users and items are integer or string ids is read into dense indices, in the order
    the file first names them; the matrix then has `user_ids` and `item_ids`, the id of
    each row and column (ints when every id is an integer), which models fitted on it keep
    (`model.recommend(..., ids=True)`, `model.predict(..., ids=True)`, save and load).
    id_maps: a matrix read so (or a model fitted on one) whose ids keep their indices, new
    ones following: read a test set with its training set's maps, and its unseen users
    and items lie past the model's (predicted from the mean and the known biases).

    part=(index, count): this rank's part of the file for a fit over a group of `count`
    processes (Context(process_group=...) or Context.join): only the entries i (in file
    order) with i % count == index are kept, while the shape, index base and ids are the
    whole file's. The matrix gets `part` = (index, count), and ALS, SGD, ImplicitALS and
    complete() fit it as this rank's part of the whole (mf_sparse_set_part): no process
    holds all the ratings."""
    ctx = resolve(ctx)
    if format not in _FORMATS:
        raise ValueError(f"mfact.read: format must be one of {sorted(_FORMATS)}, not {format!r}")
    o = _lib.ReadOpts()
    _lib.mf_read_opts_init(ctypes.byref(o))
    o.format = _FORMATS[format]
    o.index_base = to_c(index_base, "mfact.read: index_base", INT32)
    if shape is not None:
        rows, cols = _pair(shape, "shape", "(rows, cols)")
        # 0: the file's own (its header, else one more than its largest index)
        o.rows = to_c(rows, "mfact.read: shape rows", INT32, 0, INT32_MAX)
        o.cols = to_c(cols, "mfact.read: shape columns", INT32, 0, INT32_MAX)
    if pattern:
        o.flags |= _lib.SPARSE_PATTERN
    if part is not None:
        index, count = _pair(part, "part", "(index, count)")
        o.part_count = to_c(count, "mfact.read: part count", INT32, 1, INT32_MAX)
        o.part_index = to_c(index, "mfact.read: part index", INT32, 0, o.part_count - 1)
        if _lib.mf_sparse_set_part is None:
            raise Unsupported(f"mfact.read: the loaded libmfact ({_lib.library_path}) has no "
                              "split input (mf_sparse_set_part): part needs a newer library")
    keep = [_column(o, "row", user_col), _column(o, "col", item_col),
            _column(o, "value", rating_col)]
    mapped = bool(ids) or user_col is not None or item_col is not None or \
        rating_col is not None or id_maps is not None
    if mapped and _lib.mf_sparse_row_ids is None:
        raise _ids._missing("mfact.read with ids")
    o.map_ids = int(mapped)
    out = ctypes.c_void_p()
    with ctx.lock, \
            _ids.to_c(ctx, getattr(id_maps, "user_ids", None), "mfact.read") as rows, \
            _ids.to_c(ctx, getattr(id_maps, "item_ids", None), "mfact.read") as cols:
        o.row_ids, o.col_ids = rows, cols
        check(_lib.mf_sparse_read(ctx.handle, ctypes.byref(out), c_path(path, "mfact.read"),
                                  ctypes.byref(o)), ctx.handle, "mfact.read")
        del keep
        try:
            shape, nnz = shape_of(ctx, out.value)
            m = to_scipy(ctx, out.value, shape, nnz)
            if part is not None and o.part_count > 1:
                m.part = (o.part_index, o.part_count)
            if mapped:
                m.user_ids = _ids.from_c(_lib.mf_sparse_row_ids(out.value))
                m.item_ids = _ids.from_c(_lib.mf_sparse_col_ids(out.value))
            return m
        finally:
            _lib.mf_sparse_destroy(out.value)


def _factor(a, rows, name, fw):
    a = as_c(a, np.float32, name) if fw is None else on_device(a, fw, np.float32, name)
    if len(a.shape) != 2 or a.shape[0] != rows:
        raise ValueError(f"mfact: {name} must be {rows} x k, not {tuple(a.shape)}")
    return a


def _framework(*arrays):
    """The device library of the arrays (None: all on the host); mixing is an error."""
    fws = [_device.Framework(a) for a in arrays if a is not None and _device.is_device(a)]
    if fws and len(fws) != sum(a is not None for a in arrays):
        raise ValueError("mfact: the arrays must all be on the host or all on the device")
    return fws[0] if fws else None


def _run(ctx, fw, call, what):
    """A stream-ordered call: device inputs ready before it, its result after it."""
    if fw is not None:
        fw.sync_current()
    with ctx.lock:
        check(call(), ctx.handle, what)
        if fw is not None:
            fw.sync_stream(_lib.mf_ctx_stream(ctx.handle))


def sddmm(S, A, B, alpha=1.0, beta=0.0, out=None, pattern=False, ctx=None, precision="fp32"):
    """out[p] = alpha * S_ij * dot(A[i], B[j]) + beta * out[p] for each stored entry p of S
    (canonical order: row-major, columns ascending), as a float32 array of S.nnz. A float32
    C-contiguous `out` is written in place. A and B may be NumPy or device arrays (CuPy,
    PyTorch: used in place, the result on the device too). precision: "fp32" (exact float,
    the default), "3xtf32", "tf32", "bf16" or "fp16" (the factors rounded to that format,
    float sums: the header's mf_precision states each one's error bound)."""
    if precision not in _lib.PRECISIONS:
        raise ValueError(f"mfact.sddmm: precision {precision!r} is not one of "
                         f"{', '.join(_lib.PRECISIONS)}")
    ctx = resolve(ctx)
    M = as_matrix(S, ctx)
    fw = _framework(A, B, out)
    A = _factor(A, M.shape[0], "A", fw)
    B = _factor(B, M.shape[1], "B", fw)
    if A.shape[1] != B.shape[1]:
        raise ValueError(f"mfact.sddmm: A has {A.shape[1]} columns and B {B.shape[1]}")
    if out is None:
        if beta != 0.0:
            raise ValueError("mfact.sddmm: beta != 0 needs out")
        out = np.empty(M.nnz, np.float32) if fw is None else fw.empty(M.nnz, np.float32)
    elif tuple(getattr(out, "shape", ())) != (M.nnz,) or (
            not fw.is_c(out, np.float32) if fw is not None else
            not (isinstance(out, np.ndarray) and out.dtype == np.float32 and
                 out.flags["C_CONTIGUOUS"] and out.flags["WRITEABLE"])):
        raise ValueError(f"mfact.sddmm: out must be a writable C-contiguous float32 array of "
                         f"{M.nnz}")
    where = _lib.MEMORY_HOST if fw is None else _lib.MEMORY_DEVICE
    to_c(A.shape[1], "mfact.sddmm: the columns of A and B", INT32)
    _run(ctx, fw, lambda: _lib.mf_sddmm_ex(ctx.handle, M.handle, A.shape[1], ptr(A), A.shape[1],
                                           ptr(B), B.shape[1], float(alpha), float(beta),
                                           ptr(out), where, 1 if pattern else 0,
                                           _lib.PRECISIONS[precision]), "mfact.sddmm")
    return out


def spmm(S, X, alpha=1.0, transpose=False, ctx=None):
    """alpha * op(S) @ X as a float32 array (op(S): S, or its transpose), on the host or,
    for a device X, on its device."""
    ctx = resolve(ctx)
    M = as_matrix(S, ctx)
    p, q = M.shape[::-1] if transpose else M.shape
    fw = _framework(X)
    X = as_c(X, np.float32, "X") if fw is None else on_device(X, fw, np.float32, "X")
    if len(X.shape) != 2 or X.shape[0] != q:
        raise ValueError(f"mfact.spmm: X must have {q} rows, not shape {tuple(X.shape)}")
    n = X.shape[1]
    Y = np.empty((p, n), np.float32) if fw is None else fw.empty((p, n), np.float32)
    where = _lib.MEMORY_HOST if fw is None else _lib.MEMORY_DEVICE
    _run(ctx, fw, lambda: _lib.mf_spmm(ctx.handle, 1 if transpose else 0, M.handle, n,
                                       float(alpha), ptr(X), n, 0.0, ptr(Y), n, where),
         "mfact.spmm")
    return Y
