"""ImplicitALS, recommendations and ranking metrics through the binding (CPU): quality on a
planted implicit matrix against popularity, recommend and similar_items against NumPy
brute force (ties to the smaller id, exclusions, padding), recalculate_user against the
fold-in's normal equations, ranking_metrics against implicit's formulas by hand, the
explicit models' recommend, and every bad input."""
import numpy as np
import pytest
import scipy.sparse as sp

import mfact
from conftest import random_ratings, split


def planted(users=400, items=300, groups=6, per_user=25, seed=0):
    """Play counts: each user plays mostly items of its group's 50 (a planted taste), the
    rest drawn by a power-law popularity that favours no group."""
    rng = np.random.default_rng(seed)
    taste = min(50, items // 2)
    group_items = [rng.choice(items, taste, replace=False) for _ in range(groups)]
    pop = 1.0 / np.arange(1, items + 1) ** 0.8
    pop = rng.permutation(pop / pop.sum())
    rows, cols = [], []
    for u in range(users):
        g = u % groups
        own = rng.choice(group_items[g], int(per_user * 0.8), replace=False)
        other = rng.choice(items, per_user - len(own), replace=False, p=pop)
        cols.append(np.concatenate([own, other]))
        rows.append(np.full(per_user, u))
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    plays = 1.0 + rng.poisson(3.0, rows.size)
    M = sp.coo_matrix((plays.astype(np.float32), (rows, cols)), shape=(users, items)).tocsr()
    M.sum_duplicates()
    return M


def top_n(scores, N, exclude=None):
    """Brute force: scores (users x items, float64) best first, ties to the smaller id,
    excluded items (one CSR row per user) never listed; padded with -1 / -inf."""
    scores = np.array(scores, np.float64)
    if exclude is not None:
        for b in range(scores.shape[0]):
            scores[b, exclude.indices[exclude.indptr[b]:exclude.indptr[b + 1]]] = -np.inf
    ids = np.full((scores.shape[0], N), -1, np.int64)
    out = np.full((scores.shape[0], N), -np.inf)
    for b in range(scores.shape[0]):
        order = np.lexsort((np.arange(scores.shape[1]), -scores[b]))
        order = order[np.isfinite(scores[b, order])][:N]
        ids[b, :len(order)], out[b, :len(order)] = order, scores[b, order]
    return ids, out


def assert_same_lists(got_ids, got_scores, want_ids, want_scores, tol=1e-4):
    """The scores agree; the ids agree wherever the brute force's neighbours are not tied
    within float32 rounding (there the order may differ)."""
    np.testing.assert_allclose(got_scores, want_scores, rtol=tol, atol=tol)
    for b in range(want_ids.shape[0]):
        s = want_scores[b]
        gap = np.minimum(np.abs(np.diff(s, prepend=np.inf)), np.abs(np.diff(s, append=-np.inf)))
        clear = ~(gap <= tol * np.maximum(1.0, np.abs(s)))
        np.testing.assert_array_equal(got_ids[b][clear], want_ids[b][clear])


def fold_in(V, rows, lam, conf):
    """The fold-in's normal equations in float64: for each row of interactions,
    (V^T V + V_I^T (C - 1) V_I + lambda I) x = V_I^T C 1."""
    V = V.astype(np.float64)
    out = np.zeros((rows.shape[0], V.shape[1]))
    G = V.T @ V
    for b in range(rows.shape[0]):
        idx = rows.indices[rows.indptr[b]:rows.indptr[b + 1]]
        if idx.size == 0:
            continue
        c = conf(rows.data[rows.indptr[b]:rows.indptr[b + 1]].astype(np.float64))
        Vi = V[idx]
        A = G + Vi.T @ ((c - 1.0)[:, None] * Vi) + lam * np.eye(V.shape[1])
        out[b] = np.linalg.solve(A, Vi.T @ c)
    return out


def metrics_by_hand(U, V, train, test, K):
    """implicit's ranking_metrics_at_k, written out: precision over sum min(K, |T_u|), AP
    and NDCG per user, AUC from the list with the unlisted positives ranked mid-way."""
    users, items = test.shape
    test, train = test.tocsr(), train.tocsr()
    relevant = pr_div = ap_sum = ndcg_sum = auc_sum = 0.0
    n = 0
    for u in range(users):
        T = set(test.indices[test.indptr[u]:test.indptr[u + 1]].tolist())
        if not T:
            continue
        ids, _ = top_n((U[u:u + 1] @ V.T).astype(np.float64), K, train[u])
        hit = miss = 0
        ap = dcg = auc = 0.0
        for j, i in enumerate(ids[0]):
            if i in T:
                hit += 1
                ap += hit / (j + 1)
                dcg += 1.0 / np.log2(j + 2)
            else:
                miss += 1
                auc += hit
        cut = min(K, len(T))
        idcg = sum(1.0 / np.log2(j + 2) for j in range(cut))
        neg = items - len(T)
        auc += (hit + len(T)) / 2.0 * (neg - miss)
        relevant += hit
        pr_div += cut
        ap_sum += ap / cut
        ndcg_sum += dcg / idcg
        auc_sum += auc / (len(T) * neg)
        n += 1
    return {"precision": relevant / pr_div, "map": ap_sum / n, "ndcg": ndcg_sum / n,
            "auc": auc_sum / n}


def test_planted_quality_above_popularity(ctx):
    M = planted()
    train, test = split(M, 0.2, seed=3)
    model = mfact.ImplicitALS(rank=16, lambda_=0.1, alpha=2.0, iterations=15, ctx=ctx)
    model.fit(train)
    assert model.user_factors.shape == (400, 16) and model.item_factors.shape == (300, 16)
    assert model.user_factors.dtype == np.float32
    assert model.report["iterations"] == 15 and model.report["solver"] == "cg"
    got = mfact.ranking_metrics(model, train, test, K=10)
    popularity = np.asarray(train.sum(axis=0)).ravel().astype(np.float32)
    pop = mfact.ranking_metrics((np.ones((400, 1), np.float32), popularity[:, None]), train,
                                test, K=10, ctx=ctx)
    assert set(got) == {"precision", "map", "ndcg", "auc"}
    assert got["precision"] > 1.5 * pop["precision"], (got, pop)
    assert got["ndcg"] > pop["ndcg"] and got["auc"] > pop["auc"]
    by_hand = metrics_by_hand(model.user_factors, model.item_factors, train, test, 10)
    for key in by_hand:
        assert got[key] == pytest.approx(by_hand[key], rel=1e-6), key


def test_recommend_is_the_brute_force(ctx):
    M = planted(200, 150, seed=1)
    model = mfact.ImplicitALS(rank=8, iterations=5, ctx=ctx).fit(M)
    U, V = model.user_factors, model.item_factors
    users = np.arange(200)
    ids, scores = model.recommend(users, N=10)  # the training matrix filtered
    assert ids.shape == (200, 10) and ids.dtype == np.int32 and scores.dtype == np.float32
    want_ids, want_scores = top_n(U @ V.T, 10, M)
    assert_same_lists(ids, scores, want_ids, want_scores)
    # Rows of user_items per user id (implicit's convention), ids in any order, repeated.
    pick = np.array([7, 3, 199, 3, 0])
    rows = sp.csr_matrix(M[[1, 2, 3, 4, 5]])  # deliberately not the users' own rows
    ids, scores = model.recommend(pick, rows, N=12)
    want_ids, want_scores = top_n(U[pick] @ V.T, 12, rows)
    assert_same_lists(ids, scores, want_ids, want_scores)
    # The whole matrix again, through user_items (ids 0..n-1 go straight to the library).
    ids2, _ = model.recommend(users, M, N=10)
    np.testing.assert_array_equal(ids2, model.recommend(users, N=10)[0])
    # No filter; one user gives 1-D arrays.
    one_ids, one_scores = model.recommend(5, N=7, filter_already_liked_items=False)
    want_ids, want_scores = top_n(U[5:6] @ V.T, 7)
    assert one_ids.shape == (7,)
    assert_same_lists(one_ids[None], one_scores[None], want_ids, want_scores)


def test_recommend_ties_exclusions_and_padding(ctx):
    M = planted(30, 20, groups=2, per_user=8, seed=2)
    model = mfact.ImplicitALS(rank=4, iterations=2, ctx=ctx).fit(M)
    V = model.item_factors.copy()
    V[[3, 9, 14]] = V[11]  # items 3, 9, 11 and 14 score alike for every user
    model.item_factors = V
    ids, scores = model.recommend(np.arange(30), N=20, filter_already_liked_items=False)
    want_ids, _ = top_n(model.user_factors @ V.T, 20)
    for b in range(30):
        tied = [j for j in range(20) if ids[b, j] in (3, 9, 11, 14)]
        assert [ids[b, j] for j in tied] == [3, 9, 11, 14]  # ties: the smaller id first
        assert len({scores[b, j] for j in tied}) == 1
    # N past the candidates: each user's 20 - |liked| items, then -1 and -inf.
    ids, scores = model.recommend(np.arange(30), N=20)
    for u in range(30):
        liked = set(M.indices[M.indptr[u]:M.indptr[u + 1]].tolist())
        left = 20 - len(liked)
        assert set(ids[u, :left].tolist()) == set(range(20)) - liked
        assert (ids[u, left:] == -1).all() and np.isneginf(scores[u, left:]).all()


def test_similar_items_by_cosine(ctx):
    M = planted(100, 60, seed=4)
    model = mfact.ImplicitALS(rank=6, iterations=4, ctx=ctx).fit(M)
    V = model.item_factors.copy()
    V[7] = 0.0  # a zero row: similarity 0 to all
    model.item_factors = V
    norms = np.linalg.norm(V.astype(np.float64), axis=1)
    safe = np.where(norms > 0, norms, 1.0)
    cos = (V @ V.T) / safe[:, None] / safe[None, :]
    cos[norms == 0, :] = 0.0
    cos[:, norms == 0] = 0.0
    np.fill_diagonal(cos, -np.inf)  # the item itself is left out
    items = np.array([0, 5, 7, 59])
    ids, scores = model.similar_items(items, N=8)
    want_ids, want_scores = top_n(cos[items], 8)
    assert_same_lists(ids, scores, want_ids, want_scores)
    one, _ = model.similar_items(5, N=3)
    np.testing.assert_array_equal(one, ids[1, :3])


@pytest.mark.parametrize("confidence", ["linear", "log"])
def test_recalculate_user_is_the_fold_in(ctx, confidence):
    M = planted(150, 80, seed=5)
    alpha, lam, eps = 3.0, 1.0, 2.0
    model = mfact.ImplicitALS(rank=8, lambda_=lam, alpha=alpha, confidence=confidence,
                              epsilon=eps, solver="exact", iterations=80, ctx=ctx).fit(M)
    conf = (lambda r: 1 + alpha * r) if confidence == "linear" else \
        (lambda r: 1 + alpha * np.log1p(r / eps))
    users = np.array([0, 17, 149])
    got = model.recalculate_user(users, M[users])
    assert got.shape == (3, 8) and got.dtype == np.float32
    want = fold_in(model.item_factors, M[users], lam, conf)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # After 80 exact sweeps the run has settled: the users' own factors are the fold-in's.
    err = np.linalg.norm(got - model.user_factors[users]) / np.linalg.norm(got)
    assert err < 1e-2
    one = model.recalculate_user(17, M[17])
    assert one.shape == (8,)
    np.testing.assert_allclose(one, got[1], rtol=1e-6)
    # A new user (never in the training matrix), and one with no interactions: zeros.
    new = sp.csr_matrix((np.array([2.0, 5.0], np.float32), ([0, 0], [3, 70])), shape=(2, 80))
    got = model.recalculate_user([500, 501], new)
    np.testing.assert_allclose(got, fold_in(model.item_factors, new, lam, conf), rtol=1e-4,
                               atol=1e-5)
    assert not got[1].any()


def test_fit_inputs_progress_and_early_stop(ctx):
    M = planted(120, 90, seed=6)
    a = mfact.ImplicitALS(rank=8, iterations=4, ctx=ctx).fit(M)
    b = mfact.ImplicitALS(rank=8, iterations=4, ctx=ctx).fit(mfact.Matrix(M, ctx=ctx))
    c = mfact.ImplicitALS(rank=8, iterations=4, ctx=ctx).fit(M.tocoo().astype(np.float64))
    for other in (b, c):  # the same start from the context's seed, the same run
        np.testing.assert_array_equal(other.user_factors, a.user_factors)
        np.testing.assert_array_equal(other.item_factors, a.item_factors)
    seen = []
    m = mfact.ImplicitALS(rank=8, iterations=10, solver="exact", ctx=ctx)
    m.fit(M, callback=lambda r: seen.append(r) or len(seen) == 4)
    assert [r["iteration"] for r in seen] == [1, 2, 3, 4] and m.report["iterations"] == 4
    losses = [r["loss"] for r in seen]
    assert all(x >= y for x, y in zip(losses, losses[1:]))  # exact ALS never goes up
    assert m.history == seen and m.report["loss"] == pytest.approx(losses[-1])
    assert m.report["solver"] == "exact"
    # Without a bar or a callable no callback is installed by default (the loss is not
    # computed); with set_interrupt_checks(True) one is, for Ctrl-C, and the loss comes.
    assert np.isnan(a.report["loss"]) and a.history is None
    previous = mfact.set_interrupt_checks(True)
    try:
        d = mfact.ImplicitALS(rank=8, iterations=4, ctx=ctx).fit(M)
    finally:
        mfact.set_interrupt_checks(previous)
    assert np.isfinite(d.report["loss"])
    np.testing.assert_array_equal(d.user_factors, a.user_factors)  # the same run


def test_explicit_models_recommend(ctx):
    R = random_ratings(80, 50, 0.2, 8)
    als = mfact.ALS(rank=4, lambda_=0.1, ctx=ctx).fit(R)
    full = als.mean + als.user_biases[:, None] + als.item_biases[None, :] + \
        als.user_factors @ als.item_factors.T
    users = np.array([3, 0, 79, 3])
    ids, scores = als.recommend(users, R[users], N=10)
    want_ids, want_scores = top_n(full[users], 10, R[users])
    assert_same_lists(ids, scores, want_ids, want_scores)
    # A user the model has not seen: mean + item bias.
    ids, scores = als.recommend([500], sp.csr_matrix((1, 50)), N=5)
    want_ids, want_scores = top_n((als.mean + als.item_biases)[None, :], 5)
    assert_same_lists(ids, scores, want_ids, want_scores)
    with pytest.raises(ValueError, match="user_items"):
        als.recommend([0])  # ALS keeps no training matrix: the rows must be given
    sgd = mfact.SGD(rank=4, epochs=3, workers=1, ctx=ctx).fit(R)
    ids, _ = sgd.recommend(np.arange(80), N=3, filter_already_liked_items=False)
    want = sgd.mean + sgd.user_biases[:, None] + sgd.item_biases[None, :] + \
        sgd.user_factors @ sgd.item_factors.T
    assert_same_lists(ids, np.take_along_axis(want, ids.astype(np.int64), 1),
                      *top_n(want, 3))
    ids, _ = als.similar_items([1, 2], N=4)
    assert ids.shape == (2, 4) and 1 not in ids[0] and 2 not in ids[1]


def test_bad_inputs(ctx):
    M = planted(40, 30, groups=2, per_user=6, seed=7)
    for kw in (dict(alpha=-1.0), dict(lambda_=-0.5), dict(rank=0), dict(rank=600),
               dict(epsilon=0.0), dict(iterations=0), dict(cg_steps=0),
               dict(alpha=float("nan"))):
        bad = mfact.ImplicitALS(ctx=ctx, **kw)
        with pytest.raises(ValueError):
            bad.fit(M)
        assert bad.user_factors is None  # a failed fit leaves no half-made model
    with pytest.raises(ValueError, match="confidence"):
        mfact.ImplicitALS(confidence="quadratic", ctx=ctx).fit(M)
    with pytest.raises(ValueError, match="solver"):
        mfact.ImplicitALS(solver="magic", ctx=ctx).fit(M)
    negative = M.copy()
    negative.data[4] = -2.0
    with pytest.raises(mfact.InvalidData, match="value"):
        mfact.ImplicitALS(ctx=ctx).fit(negative)
    with pytest.raises(RuntimeError, match="fit first"):
        mfact.ImplicitALS(ctx=ctx).recommend(0)
    with pytest.raises(RuntimeError, match="fit first"):
        mfact.ImplicitALS(ctx=ctx).recalculate_user(0, M[0])
    model = mfact.ImplicitALS(rank=4, iterations=2, ctx=ctx).fit(M)
    U = model.user_factors
    with pytest.raises(ValueError):
        model.fit(negative)
    assert model.user_factors is U  # a failed fit keeps the last good model
    for N in (0, -3):
        with pytest.raises(ValueError, match="N"):
            model.recommend([0, 1], N=N)
        with pytest.raises(ValueError, match="N"):
            model.similar_items([0], N=N)
    with pytest.raises(ValueError, match="negative"):
        model.recommend([0, -1])  # the library names it
    with pytest.raises(ValueError, match="negative"):
        model.recommend([2, -1], M[[0, 1]])  # rows per id: checked before the gather
    with pytest.raises(ValueError, match="negative"):
        model.recommend(-5, filter_already_liked_items=False)
    with pytest.raises(TypeError):
        model.recommend([0.5])
    with pytest.raises(ValueError, match="rows"):
        model.recommend([0, 1, 2], M[[0, 1]])
    with pytest.raises(ValueError):
        model.recommend([0], sp.csr_matrix((1, 31)))  # another item count
    with pytest.raises(ValueError, match="outside"):
        model.similar_items([30])
    with pytest.raises(ValueError, match="outside|negative"):
        model.similar_items(-1)
    with pytest.raises(ValueError, match="one row per user"):
        model.recalculate_user([0, 1], M[[0]])
    with pytest.raises(ValueError, match="one row per user"):
        model.recalculate_user(0, sp.csr_matrix((1, 29)))
    with pytest.raises(ValueError):
        mfact.ranking_metrics(model, M, M, K=0)
    with pytest.raises(ValueError):
        mfact.ranking_metrics(model, M, sp.csr_matrix((40, 31)))
    with pytest.raises(ValueError, match="pair"):
        mfact.ranking_metrics(np.ones(3), M, M, ctx=ctx)
    with pytest.raises(ValueError, match="agree"):
        mfact.ranking_metrics((np.ones((40, 2)), np.ones((30, 3))), M, M, ctx=ctx)
    other = mfact.Context(backend="cpu")
    with pytest.raises(ValueError, match="another Context"):
        mfact.ranking_metrics(model, M, M, ctx=other)
    other.close()
