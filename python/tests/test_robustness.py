"""What issue 44 row 10 hit, and saved models (row 7's Python part): every integer checked
before it reaches a C field (never wrapped), ids outside the model refused, Ctrl-C during
a fit raising KeyboardInterrupt (a real SIGINT, with and without a progress bar), the
estimators' get_params / set_params (sklearn.base.clone), pickling, and model files saved
in one process and loaded in another with the same predictions bit for bit."""
import os
import pickle
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp

import mfact
from conftest import random_ratings


# ---- integers -------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda ctx: mfact.ALS(rank=2**40, ctx=ctx),
    lambda ctx: mfact.ALS(iterations=2**32 + 3, ctx=ctx),
    lambda ctx: mfact.ALS(cg_steps=-2**31 - 1, ctx=ctx),
    lambda ctx: mfact.SGD(epochs=2**31, ctx=ctx),
    lambda ctx: mfact.SGD(workers=2**33, ctx=ctx),
    lambda ctx: mfact.ImplicitALS(rank=2**40, ctx=ctx),
    lambda ctx: mfact.BMF(max_sweeps=2**40, ctx=ctx),
])
def test_options_out_of_range_are_refused(ctx, make):
    R = random_ratings(20, 10, 0.3, 1)
    model = make(ctx)
    with pytest.raises(OverflowError, match=r"out of range \(int32"):
        model.fit(R)
    with pytest.raises(ValueError):  # RangeError is both
        model.fit(R)
    with pytest.raises(OverflowError, match="max_iterations"):
        mfact.complete(R, rank=2, max_iterations=2**31, ctx=ctx)


def test_integers_are_checked_not_wrapped(ctx, tmp_path):
    for seed in (2**70, -1):
        with pytest.raises(OverflowError, match=r"seed = .* out of range \(uint64"):
            mfact.Context(backend="cpu", seed=seed)
    with mfact.Context(backend="cpu", seed=2**64 - 1) as big:  # the largest seed is one
        assert big.seed == 2**64 - 1
    with pytest.raises(OverflowError, match="threads"):
        mfact.Context(backend="cpu", threads=2**32)
    with pytest.raises(OverflowError, match="memory_limit"):
        mfact.Context(backend="cpu", memory_limit=-1)
    with pytest.raises(TypeError, match="integer"):
        mfact.Context(backend="cpu", seed=1.5)
    f = tmp_path / "r.txt"
    f.write_text("0 0 1\n1 1 2\n")
    with pytest.raises(OverflowError, match=r"rows = 1099511627776 is out of range"):
        mfact.read(str(f), shape=(2**40, 2), ctx=ctx)
    with pytest.raises(OverflowError, match="columns"):
        mfact.read(str(f), shape=(2, -1), ctx=ctx)
    with pytest.raises(ValueError, match="rows, cols"):
        mfact.read(str(f), shape=(2,), ctx=ctx)
    assert mfact.read(str(f), shape=(5, 4), ctx=ctx).shape == (5, 4)
    assert mfact.ALS(rank=4.0, iterations=2, ctx=ctx).fit(random_ratings(20, 10, 0.3, 1)) \
        .user_factors.shape == (20, 4)  # a whole float is taken
    with pytest.raises(TypeError, match="rank"):
        mfact.ALS(rank=4.5, ctx=ctx).fit(random_ratings(20, 10, 0.3, 1))


def test_ids_and_counts_outside_the_model(ctx):
    M = random_ratings(40, 30, 0.3, 2)
    ials = mfact.ImplicitALS(rank=4, iterations=2, ctx=ctx).fit(M)
    for call in (lambda: ials.recommend(10**6), lambda: ials.recommend([0, 40]),
                 lambda: ials.recommend(40, filter_already_liked_items=False)):
        with pytest.raises(IndexError, match=r"userid(\[1\])? = (1000000|40) is outside the "
                                             r"model's users \(0\.\.39\)"):
            call()
    with pytest.raises(ValueError, match="past 2147483647"):
        ials.recommend(2**40)  # never wrapped to a small id
    with pytest.raises(IndexError, match=r"itemid\[1\] = 30 is outside the model's items"):
        ials.similar_items([0, 30])
    with pytest.raises(IndexError, match="negative"):
        ials.similar_items(-1)
    with pytest.raises(OverflowError, match="N"):
        ials.recommend(0, N=2**40)
    with pytest.raises(OverflowError, match="K"):
        mfact.ranking_metrics(ials, M, M, K=2**32)
    als = mfact.ALS(rank=4, iterations=2, ctx=ctx).fit(M)
    with pytest.raises(ValueError, match="past 2147483647"):
        als.predict([2**32], [0])  # 2**32 would wrap to user 0
    with pytest.raises(ValueError, match="negative"):
        als.recommend([-1], sp.csr_matrix((1, 30)))


# ---- Ctrl-C ---------------------------------------------------------------------------------
def _sigint_after(seconds):
    t = threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGINT))
    t.start()
    return t


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signals reach the main thread only")
@pytest.mark.parametrize("algo", ["als", "sgd", "ials", "bar"])
def test_sigint_during_a_fit_raises_keyboard_interrupt(ctx, algo):
    """A real SIGINT partway through a fit of many iterations (no callback, or a bar):
    KeyboardInterrupt, well before the fit would have ended, and no mfact.Cancelled; the
    model holds the iterations completed (fitted, consistent) and fits again normally."""
    if algo == "bar":
        pytest.importorskip("tqdm")
    R = random_ratings(3000, 1500, 0.02, 3)
    # Enough steps to outlast the signal many times over (tens of ms each), few enough that a
    # signal that went astray fails the test in minutes instead of hanging it for hours.
    make = {"als": lambda: mfact.ALS(rank=16, iterations=1500, ctx=ctx),
            "bar": lambda: mfact.ALS(rank=16, iterations=1500, show_progress=True, ctx=ctx),
            "sgd": lambda: mfact.SGD(rank=16, epochs=3000, ctx=ctx),
            "ials": lambda: mfact.ImplicitALS(rank=16, iterations=1500, ctx=ctx)}[algo]
    model = make()
    # The fit takes over SIGINT only from Python's own handler: an earlier test (or a
    # library) that left another one would make the signal miss the fit.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    previous = mfact.set_interrupt_checks(True)  # stops a fit without a bar too
    timer = _sigint_after(0.5)
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            model.fit(R)
    finally:
        timer.cancel()
        mfact.set_interrupt_checks(previous)
    assert time.monotonic() - t0 < 60  # stopped after an iteration, not at the end
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # restored
    done = model.report["epochs" if algo == "sgd" else "iterations"]
    assert 1 <= done < 1000
    assert model.user_factors.shape == (3000, model.report.get("rank", 16)) and \
        np.isfinite(model.user_factors).all()
    model.recommend(0, R[0], N=3)  # usable as it is
    model.set_params(**{"epochs" if algo == "sgd" else "iterations": 2}).fit(R)
    assert model.report["epochs" if algo == "sgd" else "iterations"] == 2


def test_sigint_without_interrupt_checks_raises_after_the_fit(ctx):
    """set_interrupt_checks(False): no callback, the fit runs to its end, then
    KeyboardInterrupt (the model whole, never half assigned)."""
    R = random_ratings(3000, 1500, 0.02, 4)
    previous = mfact.set_interrupt_checks(False)
    model = mfact.ALS(rank=16, iterations=150, ctx=ctx)
    timer = _sigint_after(0.3)
    returned = False
    try:
        with pytest.raises(KeyboardInterrupt):
            model.fit(R)
            returned = True
            timer.join()  # a fit quicker than the timer: the signal still comes in here
            time.sleep(1)
    finally:
        timer.cancel()
        mfact.set_interrupt_checks(previous)
    if not returned:  # the signal came during the fit: raised after the whole of it
        assert model.report["iterations"] == 150 and model.mean != 0.0


def test_ctrl_c_in_a_callback_and_on_another_thread(ctx):
    """A callback's own KeyboardInterrupt is raised as it is; a fit on another thread
    installs no handler (Python's stays) and runs normally."""
    R = random_ratings(100, 60, 0.3, 7)
    calls = []

    def interrupt(record):
        calls.append(record)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        mfact.ALS(rank=4, iterations=5, callback=interrupt, ctx=ctx).fit(R)
    assert len(calls) == 1
    out = {}
    t = threading.Thread(target=lambda: out.setdefault(
        "m", mfact.ALS(rank=4, iterations=3, ctx=ctx).fit(R)))
    t.start()
    t.join()
    assert out["m"].report["iterations"] == 3 and out["m"].history is None


# ---- scikit-learn's parameters ------------------------------------------------------------
@pytest.mark.parametrize("cls", [mfact.ALS, mfact.SGD, mfact.ImplicitALS, mfact.BMF])
def test_get_and_set_params(ctx, cls):
    model = cls(rank=5, ctx=ctx)
    params = model.get_params(deep=True)
    assert params["rank"] == 5 and params["ctx"] is ctx
    assert set(params) == set(cls._param_names())
    assert model.set_params(rank=7) is model and model.rank == 7
    with pytest.raises(ValueError, match="invalid parameter 'rnk'.*valid parameters are"):
        model.set_params(rnk=3)
    assert model.get_params()["rank"] == 7


def test_sklearn_clone(ctx):
    base = pytest.importorskip("sklearn.base")
    R = random_ratings(50, 30, 0.3, 5)
    for model in (mfact.ALS(rank=3, lambda_=0.2, iterations=2, ctx=ctx),
                  mfact.SGD(rank=3, epochs=2, workers=1, ctx=ctx),
                  mfact.ImplicitALS(rank=3, iterations=2, fp16=True, ctx=ctx)):
        model.fit(R)
        c = base.clone(model)
        assert type(c) is type(model) and c is not model
        assert c.get_params() == model.get_params() and c.ctx is ctx
        assert c.user_factors is None  # unfitted
        c.fit(R)
        np.testing.assert_array_equal(c.item_factors.shape, model.item_factors.shape)


# ---- pickling and model files -------------------------------------------------------------
def _probe(n_users, n_items):
    rng = np.random.default_rng(0)
    return rng.integers(0, n_users, 200), rng.integers(0, n_items, 200)


def test_pickle_round_trip(ctx):
    R = random_ratings(60, 40, 0.3, 6)
    u, i = _probe(60, 40)
    als = mfact.ALS(rank=4, iterations=3, lambda_=0.1, ctx=ctx).fit(R)
    back = pickle.loads(pickle.dumps(als))
    assert isinstance(back, mfact.ALS) and back.get_params()["lambda_"] == 0.1
    assert back.ctx is mfact.default_context()
    assert back.report["iterations"] == 3 and back.report["rank"] == 4
    for name in ("user_factors", "item_factors", "user_biases", "item_biases"):
        np.testing.assert_array_equal(getattr(back, name), getattr(als, name))
    np.testing.assert_array_equal(back.predict(u, i), als.predict(u, i))
    ials = mfact.ImplicitALS(rank=4, iterations=2, ctx=ctx).fit(R)
    back = pickle.loads(pickle.dumps(ials))
    np.testing.assert_array_equal(back.recommend(np.arange(5), N=4)[0],
                                  ials.recommend(np.arange(5), N=4)[0])  # training kept
    bmf = pickle.loads(pickle.dumps(mfact.BMF(rank=2, ctx=ctx).fit(R)))
    assert bmf.A.shape == (60, 2)
    unfitted = pickle.loads(pickle.dumps(mfact.SGD(rank=3)))
    assert unfitted.rank == 3 and unfitted.user_factors is None
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(ctx)
    import copy
    twin = copy.deepcopy(als)
    assert twin.ctx is ctx and twin.user_factors is not als.user_factors
    np.testing.assert_array_equal(twin.predict(u, i), als.predict(u, i))


LOAD_AND_PREDICT = r"""
import sys, numpy as np, mfact
path, probe, out = sys.argv[1:4]
u, i = np.load(probe)["u"], np.load(probe)["i"]
with mfact.Context(backend="cpu", threads=2) as ctx:
    m = mfact.load(path, ctx=ctx)
    res = dict(pred=m.predict(u, i) if hasattr(m, "predict") else np.zeros(0),
               ids=m.recommend(np.arange(5), None, N=4, filter_already_liked_items=False)[0],
               kind=np.array(type(m).__name__), algo=np.array(m.saved["algorithm"]),
               rank=np.array(m.rank))
np.savez(out, **res)
"""


@pytest.mark.parametrize("cls", [mfact.ALS, mfact.SGD, mfact.ImplicitALS])
def test_save_here_load_in_another_process(ctx, tmp_path, cls):
    R = random_ratings(80, 50, 0.3, 7)
    kw = dict(epochs=3, workers=1) if cls is mfact.SGD else dict(iterations=3)
    model = cls(rank=5, ctx=ctx, **kw).fit(R)
    path = tmp_path / "model.mfm"
    assert model.save(path) is model
    u, i = _probe(80, 50)
    np.savez(tmp_path / "probe.npz", u=u, i=i)
    script = tmp_path / "load.py"
    script.write_text(LOAD_AND_PREDICT)
    subprocess.run([sys.executable, str(script), str(path), str(tmp_path / "probe.npz"),
                    str(tmp_path / "out.npz")], check=True, env=dict(os.environ))
    got = np.load(tmp_path / "out.npz")
    assert str(got["kind"]) == cls.__name__ and str(got["algo"]) == cls._ALGORITHM
    assert int(got["rank"]) == 5
    if cls is not mfact.ImplicitALS:
        want = model.predict(u, i)
        assert got["pred"].tobytes() == want.tobytes()  # bit for bit
    ids = model.recommend(np.arange(5), None, N=4, filter_already_liked_items=False)[0]
    np.testing.assert_array_equal(got["ids"], ids)
    # Here too: the loaded model is the saved one, its parameters from the file's text.
    back = mfact.load(path, ctx=ctx)
    assert type(back) is cls and back.get_params()["rank"] == 5
    for name in ("user_factors", "item_factors"):
        np.testing.assert_array_equal(getattr(back, name), getattr(model, name))
    assert back.saved["library_version"] == mfact.__version__
    assert "rank=5" in back.saved["options"]
    assert type(mfact.ALS.load(path, ctx=ctx)) is mfact.ALS  # the class asked for


def test_bad_model_files(ctx, tmp_path):
    model = mfact.ALS(rank=3, iterations=2, ctx=ctx).fit(random_ratings(30, 20, 0.3, 8))
    path = tmp_path / "m.mfm"
    model.save(str(path))
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x40  # one changed bit
    bad = tmp_path / "bad.mfm"
    bad.write_bytes(bytes(raw))
    with pytest.raises(mfact.InvalidData, match="bad.mfm.*(checksum|CRC)") as e:
        mfact.load(bad, ctx=ctx)
    assert e.value.status == 2
    short = tmp_path / "short.mfm"
    short.write_bytes(path.read_bytes()[:100])
    with pytest.raises(mfact.InvalidData, match="short.mfm.*truncated"):
        mfact.load(short, ctx=ctx)
    with pytest.raises(mfact.FileError):
        mfact.load(tmp_path / "absent.mfm", ctx=ctx)
    with pytest.raises(RuntimeError, match="fit first"):
        mfact.ALS(ctx=ctx).save(tmp_path / "x.mfm")
    with pytest.raises(mfact.FileError):
        model.save(tmp_path / "no" / "such" / "dir.mfm")


# ---- hostile arrays, closing under a call, strings ------------------------------------------
def test_sparse_arrays_shorter_than_their_matrix(ctx):
    """SciPy checks a matrix's arrays when it is built, not after they are replaced: the
    binding checks every length the library would read through a bare pointer."""
    def csr():
        return sp.csr_matrix((np.array([1.0, 2.0], np.float32), np.array([0, 1], np.int32),
                              np.array([0, 1, 2], np.int32)), shape=(2, 2))
    past = csr()
    past.indptr = np.array([0, 1, 2000], np.int32)  # nnz 2000 over 2 indices
    short_data = csr()
    short_data.data = np.array([1.0], np.float32)
    short_indptr = csr()
    short_indptr.indptr = np.array([0, 1], np.int32)  # 2 offsets for 2 rows
    for m, needle in ((past, "2 column indices for 2000 entries"),
                      (short_data, "1 values for 2 entries"),
                      (short_indptr, r"2 offsets for 2 rows")):
        with pytest.raises(ValueError, match=needle):
            mfact.Matrix(m, ctx=ctx)
    assert mfact.Matrix(csr(), ctx=ctx).nnz == 2
    assert mfact.Matrix(short_data, ctx=ctx, pattern=True).nnz == 2  # values not read


def test_closing_during_a_fit(ctx):
    """A progress callback closing the matrix being fitted, or the test set: both are
    freed when the fit ends, not under it. Closing the context from a callback is refused
    (the error ends the fit). Another thread closing the matrix mid-fit: the same."""
    R = random_ratings(300, 200, 0.1, 5)
    for close_what in ("train", "test"):
        M, T = mfact.Matrix(R, ctx=ctx), mfact.Matrix(R, ctx=ctx)

        def cb(progress, M=M, T=T, close_what=close_what):
            (M if close_what == "train" else T).close()

        model = mfact.ALS(rank=4, iterations=3, ctx=ctx, callback=cb).fit(M, test=T)
        assert np.isfinite(model.report["test_rmse"])
        with pytest.raises(ValueError, match="closed"):
            (M if close_what == "train" else T).handle
    own = mfact.Context(backend="cpu")

    def close_ctx(progress):
        own.close()

    with pytest.raises(RuntimeError, match="still running on this thread"):
        mfact.ALS(rank=4, iterations=3, ctx=own, callback=close_ctx).fit(R)
    own.close()  # after the call: fine
    M = mfact.Matrix(R, ctx=ctx)
    started, closed, result = threading.Event(), threading.Event(), []

    def hold(progress):  # the fit waits in its first callback until M is closed
        started.set()
        closed.wait(60)

    fit = threading.Thread(target=lambda: result.append(
        mfact.SGD(rank=8, epochs=3, ctx=ctx, callback=hold).fit(M)))
    fit.start()
    assert started.wait(60)
    M.close()  # while the fit runs on another thread: freed when it ends
    closed.set()
    fit.join()
    assert len(result) == 1 and np.isfinite(result[0].report["train_rmse"])


def test_a_matrix_copy_is_the_matrix(ctx):
    import copy
    M = mfact.Matrix(random_ratings(20, 10, 0.3, 1), ctx=ctx)
    assert copy.copy(M) is M and copy.deepcopy(M) is M
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(M)


def test_strings_with_a_nul_are_refused(ctx, tmp_path):
    """ctypes hands bytes over as char *: the library would stop at the NUL, so a save
    to "a.mfm\\0x" would overwrite a.mfm."""
    R = random_ratings(20, 10, 0.3, 1)
    model = mfact.ALS(rank=2, iterations=1, ctx=ctx).fit(R)
    victim = tmp_path / "victim.mfm"
    with pytest.raises(ValueError, match="NUL"):
        model.save(f"{victim}\0.new")
    assert not victim.exists()
    with pytest.raises(ValueError, match="NUL"):
        mfact.load(f"{victim}\0x", ctx=ctx)
    data = tmp_path / "r.csv"
    data.write_text("u,i,r\na,x,1\nb,y,2\n")
    with pytest.raises(ValueError, match="NUL"):
        mfact.read(f"{data}\0x", ctx=ctx)
    with pytest.raises(ValueError, match="NUL"):
        mfact.read(str(data), user_col="u\0zz", item_col="i", rating_col="r", ctx=ctx)


@pytest.mark.parametrize("make", [
    lambda ctx: mfact.ALS(rank=2**31 - 1, ctx=ctx),
    lambda ctx: mfact.ALS(rank=-1, ctx=ctx),
    lambda ctx: mfact.SGD(rank=-3, ctx=ctx),
    lambda ctx: mfact.ImplicitALS(rank=2**31 - 1, ctx=ctx),
    lambda ctx: mfact.BMF(rank=2**31 - 1, ctx=ctx),
])
def test_a_bad_rank_is_named_before_outputs_are_made(ctx, make):
    """Outputs are sized by the rank only within the ranks any algorithm takes: beyond,
    the library's InvalidArgument names the rank (was a 240 GiB allocation, or NumPy's
    'negative dimensions')."""
    R = random_ratings(30, 20, 0.3, 1)
    with pytest.raises(mfact.InvalidArgument, match="rank"):
        make(ctx).fit(R)
    with pytest.raises(mfact.InvalidArgument, match="rank"):
        mfact.complete(R, rank=2**31 - 1, ctx=ctx)


def test_small_things_a_caller_hits(ctx):
    """Empty id lists are no ids (NumPy makes [] float64); complex input is refused, not
    silently made real; sddmm's out of the wrong kind is the ValueError other bad outs get;
    an unpickled implicit model given a context recommends with its training matrix there."""
    R = random_ratings(30, 20, 0.3, 1)
    model = mfact.ALS(rank=2, iterations=1, ctx=ctx).fit(R)
    assert model.predict([], []).shape == (0,)
    with pytest.raises(TypeError, match="complex"):
        mfact.Matrix(1j * np.eye(3), ctx=ctx)
    A = np.ones((30, 2), np.float32)
    B = np.ones((20, 2), np.float32)
    with pytest.raises(ValueError, match="out must be"):
        mfact.sddmm(R, A, B, out=[0.0] * R.nnz, ctx=ctx)
    ials = mfact.ImplicitALS(rank=2, iterations=2, ctx=ctx).fit(R)
    want = ials.recommend(0, N=5)
    other = pickle.loads(pickle.dumps(ials))
    other.ctx = ctx
    got = other.recommend(0, N=5)
    assert np.array_equal(got[0], want[0])
