"""ALS, SGD and BMF through the binding: the same results as the C tool for the same data
and seed, known answers (predictions and RMSE against NumPy), quality on MovieLens 100K,
progress, early stop and Ctrl-C."""
import json
import logging
import os
import re
import subprocess

import numpy as np
import pytest
import scipy.sparse as sp

import mfact
from conftest import REPO, random_ratings


def cli():
    path = os.environ.get("MFACT_CLI") or str(REPO / "build" / "cli" / "mfact")
    if not os.path.exists(path):
        pytest.skip(f"the mfact tool ({path}) is not built")
    return path


def write_triplets(path, M):
    coo = M.tocoo()
    with open(path, "w") as f:
        for r, c, v in zip(coo.row, coo.col, coo.data):
            f.write(f"{r} {c} {v:g}\n")


@pytest.mark.parametrize("algo", ["als", "sgd"])
def test_same_result_as_the_c_tool(tmp_path, algo):
    """The binding and `mfact als|sgd` on the same files, seed and threads: the same RMSEs."""
    R = random_ratings(300, 200, 0.1, 5)
    R[0, 0] = 3.0  # index 0 present: both read the files 0-based
    train, test = R[:, :], R.copy()
    write_triplets(tmp_path / "train.txt", train)
    write_triplets(tmp_path / "test.txt", test)
    args = [cli(), algo, str(tmp_path / "train.txt"), "--test", str(tmp_path / "test.txt"),
            "--backend", "cpu", "--threads", "2", "--seed", "9", "--json", "--rank", "8"]
    if algo == "sgd":
        args += ["--workers", "1"]
    run = subprocess.run(args, check=True, capture_output=True, text=True)
    out = json.loads(run.stdout.strip().splitlines()[-1])  # progress lines come first
    with mfact.Context(backend="cpu", threads=2, seed=9) as ctx:
        read = lambda p: mfact.read(str(p), ctx=ctx)
        tr, te = read(tmp_path / "train.txt"), read(tmp_path / "test.txt")
        if algo == "als":
            m = mfact.ALS(rank=8, ctx=ctx).fit(tr, test=te)
        else:
            m = mfact.SGD(rank=8, workers=1, ctx=ctx).fit(tr, test=te)
    assert m.report["test_rmse"] == pytest.approx(out["test_RMSE"], rel=1e-4)
    assert m.report["train_rmse"] == pytest.approx(out["train_RMSE"], rel=1e-4)


def test_predictions_are_the_model(ctx):
    R = random_ratings(120, 80, 0.2, 2)
    # A small lambda: the factor term must matter, or a swapped U and V would pass.
    m = mfact.ALS(rank=6, iterations=3, lambda_=0.05, ctx=ctx).fit(R)
    assert np.abs(np.einsum("pk,pk->p", m.user_factors[:5], m.item_factors[:5])).max() > 0.1
    users = np.array([0, 5, 119, 200, 7], np.int64)  # 200: a user the model has not seen
    items = np.array([1, 79, 0, 3, 500], np.int64)   # 500: an item it has not seen
    got = m.predict(users, items)
    U, V, bu, bi = m.user_factors, m.item_factors, m.user_biases, m.item_biases
    for p, (u, i) in enumerate(zip(users, items)):
        want = m.mean + (bu[u] if u < 120 else 0) + (bi[i] if i < 80 else 0)
        if u < 120 and i < 80:
            want += float(U[u] @ V[i])
        assert got[p] == pytest.approx(want, rel=1e-5, abs=1e-5)
    coo = R.tocoo()
    pred = m.predict(coo.row, coo.col)
    assert m.rmse(R) == pytest.approx(np.sqrt(np.mean((coo.data - pred) ** 2)), rel=1e-5)
    assert m.report["train_rmse"] == pytest.approx(m.rmse(R), rel=1e-5)


def _bf16(x):
    """float32 values rounded to bf16 (nearest, ties to even), as float32."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def test_reduced_precision_evaluation(ctx):
    """precision= on predict and rmse rounds the factors (bf16 here) and sums in float; an
    ALS run's rmse_precision changes its reported RMSEs and not its factors; complete()
    with a reduced precision meets the same tolerance; bad names are ValueErrors."""
    R = random_ratings(150, 100, 0.2, 3)
    m = mfact.ALS(rank=16, iterations=3, lambda_=0.05, ctx=ctx).fit(R)
    coo = R.tocoo()
    got = m.predict(coo.row, coo.col, precision="bf16")
    U, V = _bf16(m.user_factors).astype(np.float64), _bf16(m.item_factors).astype(np.float64)
    want = m.mean + m.user_biases[coo.row] + m.item_biases[coo.col] + \
        np.einsum("pk,pk->p", U[coo.row], V[coo.col])
    assert np.abs(got - want).max() < 1e-5
    assert np.abs(got - m.predict(coo.row, coo.col)).max() > 1e-5  # the rounding happened
    rmse16 = m.rmse(R, precision="bf16")
    assert rmse16 == pytest.approx(np.sqrt(np.mean((coo.data - got) ** 2)), rel=1e-5)
    assert rmse16 != m.rmse(R) and rmse16 == pytest.approx(m.rmse(R), rel=1e-2)
    m16 = mfact.ALS(rank=16, iterations=3, lambda_=0.05, rmse_precision="bf16", ctx=ctx).fit(R)
    assert np.array_equal(m16.user_factors, m.user_factors)
    assert m16.report["train_rmse"] == pytest.approx(rmse16, rel=1e-6)
    with pytest.raises(ValueError, match="precision"):
        m.rmse(R, precision="fp8")
    with pytest.raises(ValueError, match="precision"):
        mfact.ALS(rank=4, rmse_precision="half", ctx=ctx).fit(R)
    rng = np.random.default_rng(5)
    A, B = rng.standard_normal((200, 4)), rng.standard_normal((150, 4))
    full = (A @ B.T).astype(np.float32)
    seen = rng.random(full.shape) < 0.3
    obs = sp.csr_matrix((full[seen], np.nonzero(seen)), shape=full.shape)
    X, Y, rep = mfact.complete(obs, rank=4, tolerance=1e-6, precision="bf16", ctx=ctx)
    assert rep["relative_residual"] <= 1e-6 and rep["stopped"] == "tolerance"
    assert 0 < rep["reduced_iterations"] < rep["iterations"]


def test_biases_off_and_options(ctx):
    R = random_ratings(100, 60, 0.3, 4)
    m = mfact.ALS(rank=4, biases=False, solver="cg", cg_steps=3, weighting="count",
                  lambda_=0.5, ctx=ctx).fit(R)
    assert m.mean == 0.0 and not m.user_biases.any() and not m.item_biases.any()
    assert m.report["solver"] == "cg" and m.report["rank"] == 4
    assert m.report["lambda"] == pytest.approx(0.5)
    # tf32 only changes CUDA runs with tensor cores: on the CPU the same fit either way
    f = mfact.ALS(rank=4, biases=False, solver="cg", cg_steps=3, weighting="count",
                  lambda_=0.5, tf32=False, ctx=ctx).fit(R)
    if ctx.backend == "cpu":
        np.testing.assert_array_equal(f.user_factors, m.user_factors)
    s = mfact.SGD(rank=5, epochs=2, storage="fp16", schedule="constant", ctx=ctx).fit(R)
    assert s.user_factors.shape == (100, 5) and s.report["epochs"] == 2
    # layout matters in a group only: alone, sharded is the replicated fit, and says so
    assert m.report["layout"] == "replicated"
    g = mfact.ALS(rank=4, biases=False, solver="cg", cg_steps=3, weighting="count",
                  lambda_=0.5, layout="sharded", ctx=ctx).fit(R)
    np.testing.assert_array_equal(g.user_factors, m.user_factors)
    assert g.report["layout"] == "replicated"
    with pytest.raises(ValueError, match="layout"):
        mfact.ALS(rank=4, layout="rows", ctx=ctx).fit(R)


def test_movielens_quality(ctx, movielens):
    """Defaults on MovieLens 100K (80/20): the C library's documented bar (test RMSE at or
    below 0.93; the peers' table is in docs/api.md)."""
    _, train, test = movielens
    als = mfact.ALS(ctx=ctx).fit(train, test=test)
    sgd = mfact.SGD(ctx=ctx).fit(train, test=test)
    assert als.report["test_rmse"] < 0.93 and sgd.report["test_rmse"] < 0.93
    assert als.rmse(test) == pytest.approx(als.report["test_rmse"], rel=1e-6)


def test_progress_history_and_early_stop(ctx):
    R = random_ratings(100, 60, 0.3, 6)
    seen = []
    m = mfact.ALS(rank=4, iterations=6, callback=lambda r: seen.append(r) or len(seen) == 3,
                  ctx=ctx).fit(R)
    assert [r["iteration"] for r in seen] == [1, 2, 3]
    assert m.report["iterations"] == 3 and len(m.history) == 3
    assert seen[-1]["train_rmse"] == pytest.approx(m.report["train_rmse"], rel=1e-6)


def test_ctrl_c_cancels_cleanly(ctx):
    R = random_ratings(100, 60, 0.3, 7)

    def interrupt(record):
        raise KeyboardInterrupt

    m = mfact.SGD(rank=4, epochs=5, callback=interrupt, ctx=ctx)
    with pytest.raises(KeyboardInterrupt):
        m.fit(R)
    assert m.report["epochs"] == 1  # the library stopped after the step, report filled

    def broken(record):
        raise RuntimeError("from the callback")

    with pytest.raises(RuntimeError, match="from the callback"):
        mfact.ALS(rank=4, callback=broken, ctx=ctx).fit(R)


def test_bmf_recovers_blocks(ctx):
    """Two disjoint all-ones blocks: rank 2 reconstructs C exactly."""
    C = np.zeros((40, 30), bool)
    C[:20, :12] = True
    C[20:, 12:] = True
    b = mfact.BMF(rank=2, ctx=ctx).fit(sp.csr_matrix(C))
    assert b.error == 0 and b.f1 == 1.0
    assert b.A.dtype == bool and b.A.shape == (40, 2) and b.B.shape == (2, 30)
    assert (b.reconstruct() == C).all()


def test_complete_recovers_a_planted_low_rank_matrix(ctx):
    """Rank 3, 30 % of the entries observed: the completion matches the hidden entries."""
    rng = np.random.default_rng(4)
    A, B = rng.standard_normal((120, 3)), rng.standard_normal((90, 3))
    full = (A @ B.T).astype(np.float32)
    seen = rng.random(full.shape) < 0.3
    obs = sp.csr_matrix((full[seen], np.nonzero(seen)), shape=full.shape)
    records = []
    X, Y, rep = mfact.complete(obs, rank=3, tolerance=1e-6, callback=records.append, ctx=ctx)
    assert X.shape == (120, 3) and Y.shape == (90, 3)
    assert rep["relative_residual"] <= 1e-6 and rep["stopped"] == "tolerance"
    hidden = ~seen
    err = np.linalg.norm((X @ Y.T - full)[hidden]) / np.linalg.norm(full[hidden])
    assert err < 1e-3
    assert len(records) == rep["iterations"] and records[-1]["train_rmse"] <= 1e-6
    with pytest.raises(mfact.InvalidArgument, match="rank"):
        mfact.complete(obs, rank=0, ctx=ctx)


def test_show_progress_draws_a_bar(ctx, capsys):
    pytest.importorskip("tqdm")
    R = random_ratings(60, 40, 0.3, 9)
    m = mfact.SGD(rank=4, epochs=3, show_progress=True, ctx=ctx).fit(R)
    err = capsys.readouterr().err
    assert "3/3" in err and m.report["epochs"] == 3


def test_context_log_level_sends_the_fits_phases_to_logging(caplog):
    """log_level="info": the library's messages reach the logger "mfact" (an ALS fit's
    phases with their seconds); without it, none; a bad level is refused by name."""
    ratings = random_ratings(200, 40, 0.2, 5)
    with caplog.at_level(logging.DEBUG, logger="mfact"):
        with mfact.Context(backend="cpu", threads=2, seed=3, log_level="info") as c:
            mfact.ALS(rank=4, iterations=2, ctx=c).fit(ratings)
        phases = [r.getMessage() for r in caplog.records if r.name == "mfact"]
        assert any(re.fullmatch(r"mf_als_run: rank 0 of 1: the iterations: [0-9.]+ s", m)
                   for m in phases), phases
        assert all(r.levelno >= logging.INFO for r in caplog.records if r.name == "mfact")
        caplog.clear()
        with mfact.Context(backend="cpu", threads=2, seed=3) as c:
            mfact.ALS(rank=4, iterations=2, ctx=c).fit(ratings)
        assert not [r for r in caplog.records if r.name == "mfact"]
    with pytest.raises(ValueError, match="log_level must be None or one of"):
        mfact.Context(backend="cpu", log_level="loud")
