"""Shared fixtures: a CPU context, MovieLens 100K split 80/20 (skipped when ../shared/data
is absent), the repository's paths."""
import os
import pathlib
import signal
import threading

import numpy as np
import pytest
import scipy.sparse as sp

import mfact

REPO = pathlib.Path(__file__).resolve().parents[2]


def data_dir():
    env = os.environ.get("MFACT_DATA_DIR")
    return pathlib.Path(env) if env else REPO.parent / "shared" / "data"


@pytest.fixture(scope="session", autouse=True)
def python_sigint_handler():
    """Python's own SIGINT handler for the session. A process that a shell without job
    control starts in the background (`cmd &` in a script, nohup) inherits SIGINT ignored,
    and Python then installs no handler; mfact (rightly) leaves an ignored SIGINT alone, so
    the tests of Ctrl-C would see no interrupt: a fit of 100,000 iterations ran on, and a
    fit with set_interrupt_checks(True) measured nothing. Restored afterwards."""
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if previous is signal.SIG_IGN and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, previous)


@pytest.fixture
def ctx():
    with mfact.Context(backend="cpu", threads=2, seed=3) as c:
        yield c


def split(R, fraction=0.2, seed=1):
    """A seeded random split of R's entries: (train, test) CSR of R's shape."""
    coo = R.tocoo()
    held = np.random.default_rng(seed).random(coo.nnz) < fraction
    part = lambda m: sp.csr_matrix((coo.data[m], (coo.row[m], coo.col[m])), shape=R.shape)
    return part(~held), part(held)


@pytest.fixture(scope="session")
def movielens():
    path = data_dir() / "ratings" / "ml-100k.tsv"
    if not path.exists():
        pytest.skip(f"{path} absent")
    with mfact.Context(backend="cpu") as c:
        R = mfact.read(str(path), ctx=c)
    return (path,) + split(R)


def random_ratings(users, items, density, seed):
    rng = np.random.default_rng(seed)
    M = sp.random(users, items, density, format="csr", dtype=np.float32, random_state=rng)
    M.data = np.ceil(M.data * 5).astype(np.float32)
    return M
