#!/usr/bin/env python3
"""Float64 references of biased ALS-WR and biased SGD, and the grids that chose mfact's
defaults against Surprise and cmfrec (issue 21; bench/README.md, "Quality against Surprise
and cmfrec").

Model: pred(u, i) = mu + b_u + b_i + U_u . V_i, mu the training mean.

ALS: the user half-step solves [U_u; b_u] jointly, features [V_i; 1] against targets
r - mu - b_i, penalty lambda * w_u on the k factor entries and lambda_b * w_b on the bias,
where w_u = w_b = n_u (weighted, ALS-WR), 1 (unweighted) or sqrt(n_u) (sqrt), or w_u = n_u
and w_b = 1 (weighted-bconst); the item half-step is symmetric. V starts uniform in
[0, 0.1), biases at 0; users first.

SGD (Koren): for each rating, e = r - pred, then from the old values
b_u += lr (e - reg_b b_u); b_i += lr (e - reg_b b_i); U_u += lr (e V_i - reg U_u);
V_i += lr (e U_u - reg V_i), with lr_t = lr / (1 + decay t^1.5) in epoch t = 0, 1, ...
Factors start uniform in [0, 1/sqrt(k)) (mfact's start) or N(0, 0.1) (Surprise's); the
rows of users and items without training ratings keep their start, as in mfact
(--zero-cold starts them at zero, so that they predict mu plus the other side's bias); the
ratings are visited in shuffled chunks of 64 of the user-sorted list, as mfact's default
order does, or one by one in a fresh shuffle each epoch (--order ratings).

Both print test RMSEs on bench/quality.py's split (the rule of `mfact --test-fraction`).
numba, when installed, compiles the inner loops (SGD without it takes minutes per setting).
"""
import argparse
import itertools
import math
import os
import sys
import time

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ in bench/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import quality  # noqa: E402  (the split and the reader)

try:
    from numba import njit

    HAVE_NUMBA = True
except ImportError:  # plain Python: correct, slower
    HAVE_NUMBA = False

    def njit(f):
        return f


# ---------------------------------------------------------------------------------------
# ALS


@njit
def als_half_step(indptr, idx, t, F, lam, lam_b, power, bias_power, W, b):
    """For every row u of a CSR (indptr, idx) with targets t: solve
    ([F_i 1]^T [F_i 1] + diag(lam w, ..., lam w, lam_b w_b)) [W_u; b_u] = [F_i 1]^T t_u,
    w = n_u ** power, w_b = n_u ** bias_power. A row without entries gets zeros."""
    k = F.shape[1]
    for u in range(len(indptr) - 1):
        s, e = indptr[u], indptr[u + 1]
        n = e - s
        if n == 0:
            W[u, :] = 0.0
            b[u] = 0.0
            continue
        X = np.ones((n, k + 1))
        X[:, :k] = F[idx[s:e]]
        A = X.T @ X
        w = float(n) ** power
        for j in range(k):
            A[j, j] += lam * w
        A[k, k] += lam_b * float(n) ** bias_power
        sol = np.linalg.solve(A, X.T @ t[s:e])
        W[u, :] = sol[:k]
        b[u] = sol[k]


def csr(rows, cols, nrows):
    """indptr, the column of each entry, and the permutation that sorts by row."""
    order = np.argsort(rows, kind="stable")
    indptr = np.zeros(nrows + 1, dtype=np.int64)
    np.add.at(indptr, rows + 1, 1)
    return np.cumsum(indptr), cols[order].astype(np.int64), order


def predict(sp, mu, bu, bi, U, V):
    r, c, _ = sp.te
    return mu + bu[r] + bi[c] + np.einsum("ij,ij->i", U[r], V[c])


def als(sp, k, lam, lam_b, power, bias_power, iterations, seed=1):
    """Test RMSE after each iteration."""
    (r, c, v), (m, n) = sp.tr, sp.shape
    mu = v.mean()
    up, ucol, uord = csr(r, c, m)
    ip, irow, iord = csr(c, r, n)
    rng = np.random.default_rng(seed)
    V = rng.uniform(0.0, 0.1, size=(n, k))
    U = np.zeros((m, k))
    bu, bi = np.zeros(m), np.zeros(n)
    out = []
    for _ in range(iterations):
        als_half_step(up, ucol, (v - mu - bi[c])[uord], V, lam, lam_b, power, bias_power, U,
                      bu)
        als_half_step(ip, irow, (v - mu - bu[r])[iord], U, lam, lam_b, power, bias_power, V,
                      bi)
        out.append(quality.rmse(predict(sp, mu, bu, bi, U, V), sp.te[2]))
    return out


WEIGHTINGS = {  # name: (power of n_u on the factors, on the bias, lambdas, lambda_b
    # choices; None = lambda itself)
    "weighted": (1.0, 1.0, (0.02, 0.05, 0.1, 0.2, 0.3, 0.5), (0.001, 0.01, 0.1, None)),
    "unweighted": (0.0, 0.0, (1.0, 5.0, 10.0, 15.0, 30.0), (0.1, 1.0, 10.0, None)),
    "sqrt": (0.5, 0.5, (0.1, 0.3, 0.5, 1.0, 2.0, 3.0), (0.01, 0.1, 1.0, None)),
    # weighted factors, a constant penalty on the bias
    "weighted-bconst": (1.0, 0.0, (0.05, 0.08, 0.1, 0.12, 0.15), (1.0, 3.0, 10.0, 25.0)),
}


# ---------------------------------------------------------------------------------------
# SGD


@njit
def sgd_epochs(r, c, v, order_kind, mu, bu, bi, U, V, lr0, decay, reg, reg_b, epochs, seed,
               te_r, te_c, te_v, out):
    np.random.seed(seed)
    n = len(v)
    k = U.shape[1]
    chunk = 64
    nchunks = (n + chunk - 1) // chunk
    for t in range(epochs):
        lr = lr0 / (1.0 + decay * t**1.5)
        if order_kind == 0:
            perm = np.random.permutation(nchunks)
        else:
            perm = np.random.permutation(n)
        for q in range(len(perm)):
            if order_kind == 0:
                s = perm[q] * chunk
                e = min(s + chunk, n)
            else:
                s = perm[q]
                e = s + 1
            for p in range(s, e):
                u, i = r[p], c[p]
                dot = 0.0
                for j in range(k):
                    dot += U[u, j] * V[i, j]
                err = v[p] - (mu + bu[u] + bi[i] + dot)
                bu[u] += lr * (err - reg_b * bu[u])
                bi[i] += lr * (err - reg_b * bi[i])
                for j in range(k):
                    uj, vj = U[u, j], V[i, j]
                    U[u, j] += lr * (err * vj - reg * uj)
                    V[i, j] += lr * (err * uj - reg * vj)
        se = 0.0
        for p in range(len(te_v)):
            u, i = te_r[p], te_c[p]
            dot = 0.0
            for j in range(k):
                dot += U[u, j] * V[i, j]
            d = te_v[p] - (mu + bu[u] + bi[i] + dot)
            se += d * d
        out[t] = math.sqrt(se / len(te_v))


def sgd(sp, k, lr, reg, reg_b, epochs=20, decay=0.3, init="uniform", order="chunks",
        seed=1, zero_cold=False):
    (r, c, v), (m, n) = sp.tr, sp.shape
    o = np.lexsort((c, r))  # user-sorted, as mfact's chunks
    r, c, v = r[o], c[o], v[o]
    rng = np.random.default_rng(seed)
    if init == "uniform":
        U = rng.uniform(0.0, 1.0 / math.sqrt(k), size=(m, k))
        V = rng.uniform(0.0, 1.0 / math.sqrt(k), size=(n, k))
    else:
        U = rng.normal(0.0, 0.1, size=(m, k))
        V = rng.normal(0.0, 0.1, size=(n, k))
    if zero_cold:  # a user or item without training ratings predicts by the biases
        U[np.bincount(r, minlength=m) == 0] = 0.0
        V[np.bincount(c, minlength=n) == 0] = 0.0
    out = np.zeros(epochs)
    sgd_epochs(r, c, v, 0 if order == "chunks" else 1, v.mean(), np.zeros(m), np.zeros(n),
               U, V, lr, decay, reg, reg_b, epochs, seed, sp.te[0], sp.te[1], sp.te[2], out)
    return list(out)


# ---------------------------------------------------------------------------------------


def floats(text):
    return [float(x) for x in text.split(",")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--fraction", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=quality.SEED)
    ap.add_argument("--what", choices=["als", "sgd", "both"], default="both")
    ap.add_argument("--ks", default="10,32,64", help="ALS ranks (10,32,64)")
    ap.add_argument("--sgd-ks", default="10,32,100", help="SGD ranks (10,32,100)")
    ap.add_argument("--weightings", default="weighted,unweighted,sqrt,weighted-bconst")
    ap.add_argument("--iterations", type=int, default=20, help="ALS iterations (RMSE after "
                    "10 and after this many)")
    ap.add_argument("--lambdas", help="ALS lambdas (default: per weighting, see "
                    "WEIGHTINGS)")
    ap.add_argument("--lambda-bs", help="ALS bias lambdas; 'l' is lambda itself (default: "
                    "per weighting)")
    ap.add_argument("--lrs", default="0.005,0.01,0.02,0.05", help="SGD learning rates")
    ap.add_argument("--regs", default="0.02,0.05,0.1", help="SGD factor regularizations")
    ap.add_argument("--reg-b-factors", default="1,0.1", help="SGD bias regularization as "
                    "multiples of reg")
    ap.add_argument("--decays", default="0.3", help="SGD decays (lr / (1 + decay t^1.5))")
    ap.add_argument("--epochs", type=int, default=20, help="SGD epochs")
    ap.add_argument("--inits", default="uniform,normal", help="SGD starts")
    ap.add_argument("--order", choices=["chunks", "ratings"], default="chunks")
    ap.add_argument("--zero-cold", action="store_true", help="SGD: start the rows of users "
                    "and items without training ratings at zero")
    ap.add_argument("--tsv", help="append one line per setting to this file")
    args = ap.parse_args()
    files = args.files or quality.DEFAULT_DATA
    tsv = open(args.tsv, "a") if args.tsv else None
    if not HAVE_NUMBA:
        print("# without numba (pip install numba) the loops run in plain Python: ALS takes "
              "seconds per setting, SGD minutes", file=sys.stderr)
    if args.what in ("als", "both"):
        print("# data\tals\tform\tk\tlambda\tlambda_b\tRMSE after 10\tRMSE after last"
              "\tbest RMSE\tat iteration\tseconds")
    if args.what in ("sgd", "both"):
        print("# data\tsgd\tstart\tk\tlr\tlambda\treg_b\tdecay\torder\tRMSE after last"
              "\tbest RMSE\tat epoch\tseconds")

    def emit(*fields):
        line = "\t".join(str(f) for f in fields)
        print(line, flush=True)
        if tsv:
            tsv.write(line + "\n")
            tsv.flush()

    for path in files:
        if not os.path.exists(path):
            print("# %s is missing; skipped" % path)
            continue
        sp = quality.Split(path, args.fraction, args.seed)
        if args.what in ("als", "both"):
            for wname in args.weightings.split(","):
                power, bias_power, lams, lbs = WEIGHTINGS[wname]
                if args.lambdas:
                    lams = floats(args.lambdas)
                if args.lambda_bs:
                    lbs = [None if x == "l" else float(x) for x in args.lambda_bs.split(",")]
                for k in [int(x) for x in args.ks.split(",")]:
                    for lam, lb in itertools.product(lams, lbs):
                        lb = lam if lb is None else lb
                        t0 = time.perf_counter()
                        e = als(sp, k, lam, lb, power, bias_power, args.iterations)
                        emit(sp.name, "als", wname, k, lam, lb, "%.5f" % e[9],
                             "%.5f" % e[-1], "%.5f" % min(e), 1 + int(np.argmin(e)),
                             "%.1f" % (time.perf_counter() - t0))
        if args.what in ("sgd", "both"):
            grid = itertools.product([int(x) for x in args.sgd_ks.split(",")],
                                     args.inits.split(","), floats(args.decays),
                                     floats(args.lrs), floats(args.regs),
                                     floats(args.reg_b_factors))
            for k, init, decay, lr, reg, fb in grid:
                t0 = time.perf_counter()
                e = sgd(sp, k, lr, reg, fb * reg, epochs=args.epochs, decay=decay, init=init,
                        order=args.order, zero_cold=args.zero_cold)
                emit(sp.name, "sgd", init, k, lr, reg, "%g" % (fb * reg), decay,
                     args.order, "%.5f" % e[-1], "%.5f" % min(e), 1 + int(np.argmin(e)),
                     "%.1f" % (time.perf_counter() - t0))


if __name__ == "__main__":
    main()
