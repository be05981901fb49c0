#!/usr/bin/env python3
"""The pictures of docs/python-pictures.md, from real runs through the Python package:

1. test RMSE per iteration on MovieLens 100K (80/20, seeded): mfact ALS beside cmfrec's ALS
   (k = 32, lambda = 15: the best of the grid in docs/api.md), and mfact SGD beside
   Surprise's SVD (defaults), every method on the same split;
2. a Boolean factorization: a planted matrix with shuffled rows and columns, what mfact.BMF
   finds, and the matrix reordered by the factors;
3. matrix completion: the relative residual per iteration of plain and scaled ASD.

    python3 bench/python_figures.py [--data ../shared/data/ratings/ml-100k.tsv] [--out DIR]
                                   [--backend auto|cpu|cuda]

Needs mfact (pip install ./python), matplotlib, scikit-surprise and cmfrec. Each peer's
curve refits it with 1, 2, ... iterations from the same seed (both are deterministic, so
the n-iteration fit is the state after n iterations of one run); mfact's comes from its
progress callback. Prints the numbers behind every curve.
"""
import argparse
import os
import time

import numpy as np
import scipy.sparse as sp

import mfact

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def split(R, fraction=0.2, seed=1):
    coo = R.tocoo()
    held = np.random.default_rng(seed).random(coo.nnz) < fraction
    part = lambda m: sp.csr_matrix((coo.data[m], (coo.row[m], coo.col[m])), shape=R.shape)
    return part(~held), part(held)


def rmse(pred, truth):
    return float(np.sqrt(np.mean((np.asarray(pred, np.float64) - truth) ** 2)))


def surprise_curve(train, test, epochs):
    import pandas as pd
    import surprise
    coo = train.tocoo()
    df = pd.DataFrame({"u": coo.row, "i": coo.col, "r": coo.data})
    trainset = surprise.Dataset.load_from_df(
        df, surprise.Reader(rating_scale=(1, 5))).build_full_trainset()
    t = test.tocoo()
    out = []
    for n in range(1, epochs + 1):
        algo = surprise.SVD(n_epochs=n, random_state=1)
        algo.fit(trainset)
        pred = [algo.predict(int(u), int(i)).est for u, i in zip(t.row, t.col)]
        out.append(rmse(pred, t.data))
    return out


def cmfrec_curve(train, test, iterations, k=32, lam=15.0):
    import cmfrec
    t = test.tocoo()
    out = []
    for n in range(1, iterations + 1):
        model = cmfrec.CMF(k=k, lambda_=lam, method="als", niter=n, user_bias=True,
                           item_bias=True, random_state=1, verbose=False)
        model.fit(train.tocoo())
        out.append(rmse(model.predict(t.row, t.col), t.data))
    return out


def ratings_figure(plt, data, ctx, out):
    R = mfact.read(data, ctx=ctx)
    train, test = split(R)
    als_rec, sgd_rec = [], []
    mfact.ALS(ctx=ctx, callback=als_rec.append).fit(train, test=test)
    mfact.SGD(ctx=ctx, callback=sgd_rec.append).fit(train, test=test)
    als = [r["test_rmse"] for r in als_rec]
    sgd = [r["test_rmse"] for r in sgd_rec]
    t0 = time.perf_counter()
    cm = cmfrec_curve(train, test, len(als))
    su = surprise_curve(train, test, len(sgd))
    print(f"peers' curves in {time.perf_counter() - t0:.0f} s")
    for name, curve in (("mfact ALS", als), ("cmfrec ALS k=32 lambda=15", cm),
                        ("mfact SGD", sgd), ("Surprise SVD", su)):
        print(f"{name}: " + " ".join(f"{x:.4f}" for x in curve))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    for ax, curves, xlabel in ((axes[0], (("mfact ALS (defaults)", als),
                                          ("cmfrec ALS (k 32, λ 15)", cm)), "iteration"),
                               (axes[1], (("mfact SGD (defaults)", sgd),
                                          ("Surprise SVD (defaults)", su)), "epoch")):
        for label, curve in curves:
            ax.plot(range(1, len(curve) + 1), curve, marker="o", ms=3, label=label)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
        ax.legend()
    axes[0].set_ylabel("test RMSE")
    axes[0].set_ylim(0.88, 1.05)
    fig.suptitle(f"MovieLens 100K, 80/20 split ({ctx.backend})")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "ratings-rmse.png"), dpi=110)


def bmf_figure(plt, ctx, out):
    rng = np.random.default_rng(2)
    rows, cols, k = 120, 90, 4
    A = np.zeros((rows, k), bool)
    B = np.zeros((k, cols), bool)
    for f in range(k):  # overlapping blocks
        A[rng.choice(rows, 40, replace=False), f] = True
        B[f, rng.choice(cols, 30, replace=False)] = True
    C = (A.astype(np.uint8) @ B.astype(np.uint8)) > 0
    noise = rng.random(C.shape) < 0.02
    C ^= noise
    pr, pc = rng.permutation(rows), rng.permutation(cols)
    Cs = C[pr][:, pc]
    b = mfact.BMF(rank=k, ctx=ctx).fit(sp.csr_matrix(Cs))
    print(f"BMF: error {b.error} of {Cs.size} cells ({b.relative_error:.4f}), F1 {b.f1:.3f}, "
          f"noise flips {noise.sum()}")
    # Reorder by the factors: rows by the binary code of their factor set, columns alike.
    ro = np.lexsort(b.A.T[::-1])
    co = np.lexsort(b.B[::-1])
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.6))
    axes[0].imshow(Cs, cmap="Greys", interpolation="nearest")
    axes[0].set_title("C: shuffled rows and columns")
    axes[1].imshow(Cs[ro][:, co], cmap="Greys", interpolation="nearest")
    axes[1].set_title("C reordered by mfact's factors")
    axes[2].imshow(b.reconstruct()[ro][:, co], cmap="Greys", interpolation="nearest")
    axes[2].set_title(f"A∘B, rank {k}: {b.error} cells differ ({noise.sum()} noise flips)")
    for ax in axes:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    fig.savefig(os.path.join(out, "bmf.png"), dpi=110)


def asd_figure(plt, ctx, out):
    rng = np.random.default_rng(3)
    m, n, r = 800, 600, 10
    full = (rng.standard_normal((m, r)) @ rng.standard_normal((r, n))).astype(np.float32)
    seen = rng.random(full.shape) < 0.12
    obs = sp.csr_matrix((full[seen], np.nonzero(seen)), shape=full.shape)
    fig, ax = plt.subplots(figsize=(6, 3.8))
    for variant in ("plain", "scaled"):
        rec = []
        X, Y, rep = mfact.complete(obs, rank=r, variant=variant, tolerance=1e-6,
                                   max_iterations=2000, callback=rec.append, ctx=ctx)
        hidden = np.linalg.norm((X @ Y.T - full)[~seen]) / np.linalg.norm(full[~seen])
        print(f"ASD {variant}: {rep['iterations']} iterations, stopped by {rep['stopped']}, "
              f"residual {rep['relative_residual']:.2e}, error on hidden entries {hidden:.2e}")
        ax.semilogy([x["iteration"] for x in rec], [x["train_rmse"] for x in rec],
                    label=f"{variant} ASD ({rep['iterations']} iterations)")
    ax.set_xlabel("iteration")
    ax.set_ylabel("relative residual on the observed entries")
    ax.set_title(f"{m} x {n}, rank {r}, 12% observed ({ctx.backend})")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "asd.png"), dpi=110)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(REPO, "..", "shared", "data", "ratings",
                                                   "ml-100k.tsv"))
    ap.add_argument("--out", default=os.path.join(REPO, "docs", "img"))
    ap.add_argument("--backend", default="auto")
    args = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(args.out, exist_ok=True)
    ctx = mfact.Context(backend=args.backend, seed=1)
    print(f"mfact {mfact.__version__} ({mfact.build_info()}) on {ctx.backend}")
    ratings_figure(plt, args.data, ctx, args.out)
    bmf_figure(plt, ctx, args.out)
    asd_figure(plt, ctx, args.out)


if __name__ == "__main__":
    main()
