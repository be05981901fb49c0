"""read, sddmm and spmm against NumPy and SciPy; every input type; no copies of inputs
already in the C types; every error path."""
import numpy as np
import pytest
import scipy.sparse as sp

import mfact
from mfact import _arrays
from conftest import random_ratings


def test_read_formats(tmp_path, ctx):
    (tmp_path / "a.mtx").write_text("%%MatrixMarket matrix coordinate real general\n"
                                    "3 4 2\n1 1 2.5\n3 4 -1\n")
    M = mfact.read(str(tmp_path / "a.mtx"), ctx=ctx)
    assert isinstance(M, sp.csr_matrix) and M.shape == (3, 4) and M.dtype == np.float32
    assert M[0, 0] == 2.5 and M[2, 3] == -1 and M.nnz == 2
    (tmp_path / "b.txt").write_text("0 0 1\n1 2 oops\n")
    with pytest.raises(mfact.InvalidData, match=r"b\.txt:2:"):
        mfact.read(str(tmp_path / "b.txt"), ctx=ctx)
    with pytest.raises(mfact.FileError):
        mfact.read(str(tmp_path / "absent.txt"), ctx=ctx)
    with pytest.raises(ValueError):
        mfact.read(str(tmp_path / "a.mtx"), format="xml", ctx=ctx)


def test_sddmm_and_spmm_known_answers(ctx):
    S = random_ratings(50, 40, 0.2, 3)
    rng = np.random.default_rng(0)
    A = rng.standard_normal((50, 8)).astype(np.float32)
    B = rng.standard_normal((40, 8)).astype(np.float32)
    coo = S.tocsr().tocoo()  # canonical order: rows, then columns ascending
    want = coo.data * np.einsum("pk,pk->p", A[coo.row], B[coo.col])
    np.testing.assert_allclose(mfact.sddmm(S, A, B, ctx=ctx), want, rtol=1e-5, atol=1e-5)
    ones = np.einsum("pk,pk->p", A[coo.row], B[coo.col])
    np.testing.assert_allclose(mfact.sddmm(S, A, B, pattern=True, ctx=ctx), ones, rtol=1e-5,
                               atol=1e-5)
    X = rng.standard_normal((40, 5)).astype(np.float32)
    np.testing.assert_allclose(mfact.spmm(S, X, ctx=ctx), S @ X, rtol=1e-5, atol=1e-5)
    Y = rng.standard_normal((50, 5)).astype(np.float32)
    np.testing.assert_allclose(mfact.spmm(S, Y, alpha=2.0, transpose=True, ctx=ctx),
                               2.0 * (S.T @ Y), rtol=1e-5, atol=1e-5)


def test_sddmm_precisions(ctx):
    """Each precision within its bound (mfact.h, mf_precision) of float64, relative to
    sum |a_t b_t|; an unknown name is a ValueError."""
    S = random_ratings(60, 50, 0.2, 4)
    rng = np.random.default_rng(1)
    A = rng.uniform(-1, 1, (60, 32)).astype(np.float32)
    B = rng.uniform(-1, 1, (50, 32)).astype(np.float32)
    coo = S.tocsr().tocoo()
    a, b = A[coo.row].astype(np.float64), B[coo.col].astype(np.float64)
    want = coo.data * np.einsum("pk,pk->p", a, b)
    mag = np.abs(coo.data) * np.einsum("pk,pk->p", np.abs(a), np.abs(b))
    u, k = 2.0 ** -24, 32
    bounds = {"fp32": 2 * k * u, "3xtf32": (4 * k + 16) * u, "tf32": 2 ** -10 + 2 ** -22 + 2 * k * u,
              "bf16": 2 ** -7 + 2 ** -16 + 2 * k * u, "fp16": 2 ** -10 + 2 ** -22 + 2 * k * u}
    for name, rel in bounds.items():
        got = mfact.sddmm(S, A, B, precision=name, ctx=ctx)
        assert np.all(np.abs(got - want) <= rel * mag + 1e-30), name
    with pytest.raises(ValueError):
        mfact.sddmm(S, A, B, precision="fp8", ctx=ctx)


def test_every_input_type_gives_the_same_matrix(ctx):
    R = random_ratings(30, 20, 0.3, 8)
    want = R.toarray()
    inputs = [R, R.tocoo(), R.tocsc(), R.toarray(), R.astype(np.float64),
              sp.csr_matrix((R.data, R.indices.astype(np.int64), R.indptr.astype(np.int64)),
                            shape=R.shape),
              mfact.Matrix(R, ctx=ctx)]
    if hasattr(sp, "csr_array"):
        inputs.append(sp.csr_array(R))
    for x in inputs:
        m = x if isinstance(x, mfact.Matrix) else mfact.Matrix(x, ctx=ctx)
        assert m.shape == (30, 20) and m.nnz == R.nnz
        np.testing.assert_array_equal(m.to_scipy().toarray(), want)


def test_no_copy_of_c_typed_inputs(ctx):
    a = np.ones((4, 3), np.float32)
    assert _arrays.as_c(a, np.float32, "a") is a
    assert _arrays.as_c(a.astype(np.float64), np.float32, "a") is not a
    assert _arrays.as_c(np.asfortranarray(a), np.float32, "a").flags["C_CONTIGUOUS"]
    S = random_ratings(4, 5, 0.5, 1)
    out = np.full(S.nnz, 7.0, np.float32)
    got = mfact.sddmm(S, np.ones((4, 2), np.float32), np.ones((5, 2), np.float32), beta=1.0,
                      out=out, ctx=ctx)
    assert got is out and got.ctypes.data == out.ctypes.data
    np.testing.assert_allclose(out, 7.0 + 2.0 * S.tocsr().tocoo().data)


def test_error_paths(ctx):
    R = random_ratings(10, 8, 0.5, 2)
    coo = R.tocoo()
    bad = sp.coo_matrix((coo.data, (coo.row, coo.col)), shape=R.shape)
    bad.col = bad.col.copy()
    bad.col[0] = -1  # the library names the entry
    with pytest.raises(mfact.InvalidData, match=r"\[0\]"):
        mfact.Matrix(bad, ctx=ctx)
    with pytest.raises(ValueError, match="index past"):  # int32 cannot hold it
        _arrays._checked_index(np.array([0, 2**31], np.int64), "8 columns", "column indices")
    dup = sp.coo_matrix((np.ones(2, np.float32), ([0, 0], [1, 1])), shape=(2, 2))
    with pytest.raises(mfact.InvalidData, match="duplicate|repeated"):
        mfact.Matrix(dup, ctx=ctx)
    nan = R.copy()
    nan.data[3] = np.nan
    with pytest.raises(mfact.InvalidData):
        mfact.Matrix(nan, ctx=ctx)
    with pytest.raises(ValueError):
        mfact.Matrix(np.ones(3), ctx=ctx)
    bad_model = mfact.ALS(rank=0, ctx=ctx)
    with pytest.raises(mfact.InvalidArgument, match="rank"):
        bad_model.fit(R)
    assert bad_model.user_factors is None  # a failed fit leaves no half-made model
    with pytest.raises(mfact.InvalidArgument, match="learning_rate"):
        mfact.SGD(learning_rate=-1, ctx=ctx).fit(R)
    with pytest.raises(ValueError, match="solver"):
        mfact.ALS(solver="magic", ctx=ctx).fit(R)
    with pytest.raises(mfact.InvalidArgument):
        mfact.ALS(rank=4, ctx=ctx).fit(R, test=random_ratings(10, 9, 0.5, 3))
    with pytest.raises(ValueError, match="A must be"):
        mfact.sddmm(R, np.ones((3, 2), np.float32), np.ones((8, 2), np.float32), ctx=ctx)
    with pytest.raises(RuntimeError, match="fit first"):
        mfact.ALS(ctx=ctx).predict([0], [0])
    with pytest.raises(ValueError, match="backend"):
        mfact.Context(backend="tpu")
    other = mfact.Context(backend="cpu")
    with pytest.raises(ValueError, match="another Context"):
        mfact.ALS(ctx=ctx).fit(mfact.Matrix(R, ctx=other))
    other.close()
    with pytest.raises(ValueError, match="closed"):
        other.backend


def test_lifetimes_and_bad_uses(ctx):
    R = random_ratings(20, 10, 0.4, 5)
    other = mfact.Context(backend="cpu")
    M = mfact.Matrix(R, ctx=other)
    other.close()  # frees M first: M must not reach the freed context
    with pytest.raises(ValueError, match="closed"):
        M.to_scipy()
    with pytest.raises(mfact.InvalidArgument, match="cpu_threads"):
        mfact.Context(backend="cpu", threads=10**6)  # the library's own message
    m = mfact.ALS(rank=3, lambda_=0.05, ctx=ctx).fit(R)
    U = m.user_factors
    with pytest.raises(mfact.InvalidArgument):
        m.fit(R, test=random_ratings(20, 11, 0.4, 6))
    assert m.user_factors is U  # a failed fit leaves the last good model as it was
    with pytest.raises(ValueError, match="index past"):
        m.predict(np.array([2**32 + 3]), np.array([0]))  # never wrapped to user 3
    with pytest.raises(TypeError):
        m.predict(np.array([1.9]), np.array([0]))
    with pytest.raises(mfact.InvalidData):
        m.predict(np.array([-1]), np.array([0]))
    before = m.predict([1, 4], [2, 7])
    m.user_factors = np.asfortranarray(m.user_factors.astype(np.float64))
    np.testing.assert_allclose(m.predict([1, 4], [2, 7]), before, rtol=1e-6)  # converted
    m.user_biases = m.user_biases[:3]
    with pytest.raises(ValueError, match="do not agree"):
        m.predict([0], [0])
    S = random_ratings(4, 5, 0.5, 1)
    ro = np.frombuffer(bytes(4 * S.nnz), dtype=np.float32)
    with pytest.raises(ValueError, match="writable"):
        mfact.sddmm(S, np.ones((4, 2), np.float32), np.ones((5, 2), np.float32), out=ro,
                    ctx=ctx)


def test_context(ctx):
    assert ctx.backend == "cpu" and "cpu" in repr(ctx)
    assert mfact.default_context().backend in ("cpu", "cuda")
    assert mfact.__version__.count(".") == 2 and mfact.build_info()
