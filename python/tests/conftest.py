"""Shared fixtures: a CPU context, MovieLens 100K split 80/20 (skipped when ../shared/data
is absent), the repository's paths."""
import os
import pathlib

import numpy as np
import pytest
import scipy.sparse as sp

import mfact

REPO = pathlib.Path(__file__).resolve().parents[2]


def data_dir():
    env = os.environ.get("MFACT_DATA_DIR")
    return pathlib.Path(env) if env else REPO.parent / "shared" / "data"


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
