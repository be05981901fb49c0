"""Ids as users have them (issue 44 row 8): mfact.read(..., user_col=, item_col=,
rating_col=) maps string and sparse integer ids to dense indices and keeps the maps; a test
set read with the training maps numbers its unseen users and items past the model's;
models fitted on such a matrix predict and recommend in the file's ids (the index API
unchanged), and save, load and pickle keep the ids. Known answers throughout."""
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import mfact

CSV = ("userId,movieId,rating,timestamp\n"
       "alice,193609,4.5,1\n"
       "bob,1,3,2\n"
       "alice,1,5,3\n"
       "\"carol, jr\",50,2,4\n"
       "bob,193609,1,5\n")


@pytest.fixture
def files(tmp_path):
    train = tmp_path / "r.csv"
    train.write_text(CSV)
    test = tmp_path / "t.csv"
    test.write_text("userId,movieId,rating\nbob,50,4\ndave,1,2\nalice,999,3\n")
    return train, test


def test_read_maps_string_and_sparse_ids(files):
    train, _ = files
    R = mfact.read(train, user_col="userId", item_col="movieId", rating_col="rating")
    assert R.shape == (3, 3)  # not 193,610 columns
    assert R.user_ids == ["alice", "bob", "carol, jr"]
    assert R.item_ids == [193609, 1, 50]  # integers come back as ints
    assert R[0, 0] == 4.5 and R[0, 1] == 5.0 and R[2, 2] == 2.0
    # by 0-based position, and ids=True (columns 0, 1, 2): the same matrix
    for kw in ({"user_col": 0, "item_col": 1, "rating_col": 2}, {"ids": True}):
        P = mfact.read(train, **kw)
        assert P.user_ids == R.user_ids and P.item_ids == R.item_ids
        assert (P != R).nnz == 0
    # a file of indices read plainly has no maps
    plain = train.parent / "plain.txt"
    plain.write_text("1 2 3\n2 1 4\n")
    assert not hasattr(mfact.read(plain), "user_ids")


def test_read_errors_name_file_and_line(files):
    train, _ = files
    with pytest.raises(mfact.InvalidData, match=r'r\.csv:1: no column "movieid"'):
        mfact.read(train, user_col="userId", item_col="movieid")
    with pytest.raises(ValueError, match="row column = -1 is out of range"):
        mfact.read(train, user_col=-1)


def test_test_set_with_training_maps(files):
    train, test = files
    R = mfact.read(train, user_col="userId", item_col="movieId", rating_col="rating")
    T = mfact.read(test, user_col="userId", item_col="movieId", rating_col="rating", id_maps=R)
    assert T.shape == (4, 4)
    assert T.user_ids[:3] == R.user_ids and T.user_ids[3] == "dave"
    assert T.item_ids == [193609, 1, 50, 999]
    model = mfact.ALS(rank=2, iterations=3, ctx=mfact.Context(backend="cpu")).fit(R)
    # unseen pairs from the mean and the known biases
    got = model.predict(["dave", "alice"], [1, 999], ids=True)
    assert got[0] == pytest.approx(model.mean + model.item_biases[1], abs=1e-6)
    assert got[1] == pytest.approx(model.mean + model.user_biases[0], abs=1e-6)
    # the RMSE over the whole test set equals the id-based predictions'
    want = np.array([4, 2, 3], np.float32)
    pred = model.predict(["bob", "dave", "alice"], [50, 1, 999], ids=True)
    assert model.rmse(T) == pytest.approx(float(np.sqrt(np.mean((pred - want) ** 2))), rel=1e-6)


def test_models_keep_ids_through_save_load_and_pickle(files, tmp_path):
    train, _ = files
    R = mfact.read(train, user_col="userId", item_col="movieId", rating_col="rating")
    ctx = mfact.Context(backend="cpu")
    model = mfact.ALS(rank=2, iterations=3, ctx=ctx).fit(R)
    assert model.user_ids == R.user_ids and model.item_ids == R.item_ids
    # ids=True against indices: the same numbers
    assert model.predict("carol, jr", 193609, ids=True) == \
        pytest.approx(float(model.predict(np.array([2]), np.array([0]))[0]))
    items, scores = model.recommend("bob", N=2, user_items=R[1], ids=True)
    i2, s2 = model.recommend(1, N=2, user_items=R[1])
    assert list(items) == [R.item_ids[i] if i >= 0 else None for i in i2]
    assert np.array_equal(scores, s2)
    assert list(items) == [50, None]  # bob has rated 1 and 193609
    # unseen user: mean + item bias, named as given
    items, _ = model.recommend(["nobody"], N=1, filter_already_liked_items=False, ids=True)
    assert items[0][0] == R.item_ids[int(np.argmax(model.item_biases))]
    path = tmp_path / "m.mfm"
    model.save(path)
    loaded = mfact.load(path)
    assert loaded.user_ids == model.user_ids and loaded.item_ids == model.item_ids
    assert loaded.predict(["alice", "zed"], [50, 1], ids=True).tolist() == \
        model.predict(["alice", "zed"], [50, 1], ids=True).tolist()
    again = pickle.loads(pickle.dumps(model))
    assert again.user_ids == model.user_ids
    assert again.predict("bob", 1, ids=True) == model.predict("bob", 1, ids=True)
    # a new process reads the ids from the file
    code = ("import mfact, sys; m = mfact.load(sys.argv[1]); "
            "print(m.user_ids, repr(float(m.predict('alice', 50, ids=True))))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], check=True,
                         capture_output=True, text=True, env=dict(os.environ)).stdout
    assert out.startswith("['alice', 'bob', 'carol, jr'] ")
    assert float(out.split()[-1]) == model.predict("alice", 50, ids=True)


def test_ids_need_a_model_with_ids(files):
    import scipy.sparse as sp
    R = sp.csr_matrix(np.array([[1, 0], [0, 2]], np.float32))
    model = mfact.ALS(rank=1, iterations=1, ctx=mfact.Context(backend="cpu")).fit(R)
    assert model.user_ids is None
    with pytest.raises(ValueError, match="without ids"):
        model.predict("a", "b", ids=True)
    implicit = mfact.ImplicitALS(rank=1, iterations=1, ctx=mfact.Context(backend="cpu"))
    train, _ = files
    implicit.fit(mfact.read(train, ids=True))
    with pytest.raises(IndexError, match="'nobody' is not one of the model's"):
        implicit.recommend("nobody", ids=True)
    items, _ = implicit.recommend("alice", N=1, ids=True)
    assert items[0] == 50
