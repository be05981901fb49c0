"""Device arrays (run on a machine with a GPU, CuPy and PyTorch; skipped elsewhere): CuPy
and PyTorch sparse matrices and dense arrays go to the library as device pointers (dense
ones used in place), and give the results of the same data from the host."""
import numpy as np
import pytest
import scipy.sparse as sp

import mfact
from conftest import random_ratings


def cuda_ctx():
    try:
        ctx = mfact.Context(backend="cuda", seed=3)
    except (mfact.NoDevice, mfact.Unsupported):
        pytest.skip("no usable CUDA device in this build or machine")
    return ctx


@pytest.fixture(params=["cupy", "torch"])
def lib(request):
    if request.param == "cupy":
        cp = pytest.importorskip("cupy")
        import cupyx.scipy.sparse as csp
        try:
            cp.cuda.runtime.getDeviceCount()
        except Exception:
            pytest.skip("CuPy sees no device")
        return {"name": "cupy", "sparse": lambda M: csp.csr_matrix(M),
                "dense": lambda a: cp.asarray(a), "host": lambda a: cp.asnumpy(a),
                "type": cp.ndarray}
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch sees no device")
    return {"name": "torch",
            "sparse": lambda M: torch.sparse_csr_tensor(
                torch.as_tensor(M.indptr.astype(np.int64)),
                torch.as_tensor(M.indices.astype(np.int64)),  # torch wants one index dtype
                torch.as_tensor(M.data), size=M.shape, device="cuda"),
            "dense": lambda a: torch.as_tensor(a, device="cuda"),
            "host": lambda t: t.cpu().numpy(), "type": torch.Tensor}


def test_als_and_sgd_on_device_arrays(lib):
    ctx = cuda_ctx()
    R = random_ratings(400, 300, 0.05, 11)
    for Model, kw in ((mfact.ALS, dict(rank=16)), (mfact.SGD, dict(rank=16, workers=1))):
        host = Model(ctx=ctx, **kw).fit(R)
        dev = Model(ctx=ctx, **kw).fit(lib["sparse"](R))
        assert isinstance(dev.user_factors, lib["type"])
        np.testing.assert_allclose(lib["host"](dev.user_factors), host.user_factors,
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(lib["host"](dev.item_biases), host.item_biases,
                                   rtol=1e-5, atol=1e-6)
        assert dev.report["train_rmse"] == pytest.approx(host.report["train_rmse"], rel=1e-6)
        users, items = np.array([0, 3, 399, 1000]), np.array([1, 299, 5, 2])
        np.testing.assert_allclose(lib["host"](dev.predict(users, items)),
                                   host.predict(users, items), rtol=1e-5, atol=1e-5)
        assert dev.rmse(R) == pytest.approx(host.rmse(R), rel=1e-6)


def test_sddmm_spmm_in_place(lib):
    ctx = cuda_ctx()
    S = random_ratings(200, 150, 0.05, 12)
    rng = np.random.default_rng(0)
    A = rng.standard_normal((200, 8)).astype(np.float32)
    B = rng.standard_normal((150, 8)).astype(np.float32)
    dA, dB = lib["dense"](A), lib["dense"](B)
    from mfact import _arrays, _device
    fw = _device.Framework(dA)
    assert fw.is_c(dA, np.float32)  # float32, contiguous: taken as it is
    assert _arrays.ptr(fw.convert(dA, np.float32)).value == _arrays.ptr(dA).value  # no copy
    want = mfact.sddmm(S, A, B, ctx=ctx)
    out = lib["dense"](np.zeros(S.nnz, np.float32))
    got = mfact.sddmm(S, dA, dB, out=out, ctx=ctx)
    assert got is out
    np.testing.assert_allclose(lib["host"](got), want, rtol=1e-5, atol=1e-5)
    X = rng.standard_normal((150, 4)).astype(np.float32)
    np.testing.assert_allclose(lib["host"](mfact.spmm(S, lib["dense"](X), ctx=ctx)), S @ X,
                               rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="all be on the host or all on the device"):
        mfact.sddmm(S, dA, B, ctx=ctx)


def test_bmf_from_a_device_matrix(lib):
    ctx = cuda_ctx()
    C = np.zeros((60, 40), np.float32)
    C[:30, :15] = 1
    C[30:, 15:] = 1
    b = mfact.BMF(rank=2, ctx=ctx).fit(lib["sparse"](sp.csr_matrix(C)))
    assert b.error == 0 and isinstance(b.A, np.ndarray) and (b.reconstruct() == (C > 0)).all()


def test_movielens_same_rmse_on_device(lib, movielens):
    """MovieLens 100K from CuPy / PyTorch: the test RMSE of the same data from SciPy."""
    ctx = cuda_ctx()
    _, train, test = movielens
    for Model in (mfact.ALS, mfact.SGD):
        kw = {"workers": 1} if Model is mfact.SGD else {}
        host = Model(ctx=ctx, **kw).fit(train, test=test)
        dev = Model(ctx=ctx, **kw).fit(lib["sparse"](train), test=lib["sparse"](test))
        assert dev.report["test_rmse"] == pytest.approx(host.report["test_rmse"], rel=1e-6)
        assert dev.report["test_rmse"] < 0.93


def test_implicit_als_on_device_arrays(lib):
    """ImplicitALS from CuPy / PyTorch: the factors of the same data from SciPy (same
    context, same seed), device results, and the same recommendations, neighbours,
    fold-ins and ranking metrics; the CUDA engines against the CPU's too."""
    from test_implicit import assert_same_lists, planted
    from conftest import split
    ctx = cuda_ctx()
    M = planted(300, 200, seed=11)
    train, test = split(M, 0.2, seed=2)
    kw = dict(rank=16, iterations=6, alpha=2.0, lambda_=0.1)
    host = mfact.ImplicitALS(ctx=ctx, **kw).fit(train)
    dev = mfact.ImplicitALS(ctx=ctx, **kw).fit(lib["sparse"](train))
    assert isinstance(dev.user_factors, lib["type"]) and isinstance(host.user_factors,
                                                                     np.ndarray)
    np.testing.assert_allclose(lib["host"](dev.user_factors), host.user_factors, rtol=1e-4,
                               atol=1e-4)
    np.testing.assert_allclose(lib["host"](dev.item_factors), host.item_factors, rtol=1e-4,
                               atol=1e-4)
    users = np.arange(300)
    hi, hs = host.recommend(users, N=10)
    di, ds = dev.recommend(users, N=10)
    assert isinstance(di, lib["type"])
    assert_same_lists(lib["host"](di), lib["host"](ds), hi, hs, tol=1e-3)
    pick = np.array([5, 0, 299, 5])  # rows per id: the gather on the device
    hi, hs = host.recommend(pick, train[[1, 2, 3, 4]], N=7)
    di, ds = dev.recommend(lib["dense"](pick), train[[1, 2, 3, 4]], N=7)
    assert_same_lists(lib["host"](di), lib["host"](ds), hi, hs, tol=1e-3)
    hi, hs = host.similar_items([0, 7, 199], N=5)
    di, ds = dev.similar_items([0, 7, 199], N=5)
    assert_same_lists(lib["host"](di), lib["host"](ds), hi, hs, tol=1e-3)
    np.testing.assert_allclose(lib["host"](dev.recalculate_user([3, 4], train[[3, 4]])),
                               host.recalculate_user([3, 4], train[[3, 4]]), rtol=1e-3,
                               atol=1e-4)
    mh = mfact.ranking_metrics(host, train, test)
    md = mfact.ranking_metrics(dev, train, test)
    for key in mh:
        assert md[key] == pytest.approx(mh[key], abs=2e-3), key
    with pytest.raises(ValueError, match="negative"):
        dev.recommend(lib["dense"](np.array([1, -2])), train[[0, 1]])
    # The CPU engines (double) from the same seed: the same model to float rounding (after
    # 6 iterations; test_gpu_ials holds 2e-3 after 3).
    with mfact.Context(backend="cpu", seed=3) as cpu_ctx:
        cpu = mfact.ImplicitALS(ctx=cpu_ctx, solver="exact", **kw).fit(train)
        gpu = mfact.ImplicitALS(ctx=ctx, solver="exact", **kw).fit(train)
        err = np.linalg.norm(gpu.user_factors - cpu.user_factors) / \
            np.linalg.norm(cpu.user_factors)
        assert err < 1e-2
        mc = mfact.ranking_metrics(cpu, train, test)
        mg = mfact.ranking_metrics(gpu, train, test)
        for key in mc:
            assert mg[key] == pytest.approx(mc[key], abs=1e-2), key
