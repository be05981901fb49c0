"""What the Python binding adds (issue 23's bars): mfact.ALS(rank=100).fit on a
Netflix-shaped matrix, the wall time of the Python call against the time of the C call it
makes (mf_als_run, timed around the ctypes function; the report's `seconds`, the library's
own clock inside that call, is printed beside it), and the cost per
call of mfact.sddmm on tiny inputs against the same C call made directly through ctypes
with everything prepared. Run where the package is installed:

    python3 bench/python_overhead.py [--users N --items N --ratings N] [--backend cuda]
"""
import argparse
import ctypes
import os
import time

import numpy as np
import scipy.sparse as sp

import mfact
from mfact import _lib


def netflix_shaped(users, items, ratings, seed=0):
    """Log-normal user activity and item popularity (items capped at 45 % of users),
    ratings 1..5 from a planted rank-10 model plus noise."""
    rng = np.random.default_rng(seed)
    pu = rng.lognormal(0, 1.0, users)
    pi = rng.lognormal(0, 1.5, items)
    pu, pi = pu / pu.sum(), pi / pi.sum()
    pi = np.minimum(pi, 0.45 * users / ratings)  # no item rated by more than ~45 % of users
    pi /= pi.sum()
    u = rng.choice(users, ratings, p=pu).astype(np.int32)
    i = rng.choice(items, ratings, p=pi).astype(np.int32)
    key = np.unique(u.astype(np.int64) * items + i)
    u, i = (key // items).astype(np.int32), (key % items).astype(np.int32)
    U = rng.standard_normal((users, 10)).astype(np.float32) * 0.3
    V = rng.standard_normal((items, 10)).astype(np.float32) * 0.3
    r = np.clip(np.rint(3.6 + np.einsum("pk,pk->p", U[u], V[i]) +
                        rng.standard_normal(len(u)) * 0.8), 1, 5).astype(np.float32)
    return sp.csr_matrix((r, (u, i)), shape=(users, items))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--users", type=int, default=480189)
    ap.add_argument("--items", type=int, default=17770)
    ap.add_argument("--ratings", type=int, default=20_000_000)
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cache", help="an .npz to load the matrix from, or to save it to")
    args = ap.parse_args()
    ctx = mfact.Context(backend=args.backend)
    t0 = time.perf_counter()
    if args.cache and os.path.exists(args.cache):
        R = sp.load_npz(args.cache).tocsr()
    else:
        R = netflix_shaped(args.users, args.items, args.ratings)
        if args.cache:
            sp.save_npz(args.cache, R, compressed=False)
    print(f"mfact {mfact.__version__} on {ctx.backend}: {R.shape[0]} x {R.shape[1]}, "
          f"{R.nnz} ratings (made in {time.perf_counter() - t0:.1f} s)")
    # The C call itself, timed around the ctypes function the binding calls.
    calls = []
    real = _lib.mf_als_run

    def timed(*a):
        t = time.perf_counter()
        status = real(*a)
        calls.append(time.perf_counter() - t)
        return status

    _lib.mf_als_run = timed
    print("\n| call | Python wall s | the C call s | library s (report) | binding adds |")
    print("|---|---|---|---|---|")
    M = mfact.Matrix(R, ctx=ctx)  # built once: what the C bench does before timing
    for what, data in (("Matrix", M), ("scipy CSR", R)):
        walls, libs, cs = [], [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            m = mfact.ALS(rank=100, weighting="count", lambda_=0.048, ctx=ctx).fit(data)
            walls.append(time.perf_counter() - t)
            libs.append(m.report["seconds"])
            cs.append(calls[-1])
            del m
        wall, c, lib_s = (float(np.median(x)) for x in (walls, cs, libs))
        print(f"| ALS(rank=100).fit({what}), median of {args.repeat} | {wall:.4f} | {c:.4f} | "
              f"{lib_s:.4f} | {100 * (wall - c) / c:.2f}% |")
    _lib.mf_als_run = real
    t = time.perf_counter()
    mfact.Matrix(R, ctx=ctx).close()
    print(f"\nbuilding the library's matrix from the SciPy CSR: {time.perf_counter() - t:.3f} s")

    # Tiny sddmm: the binding's call against the bare ctypes call of the same function.
    S = sp.random(8, 6, 0.5, format="csr", dtype=np.float32, random_state=1)
    Mtiny = mfact.Matrix(S, ctx=ctx)
    A = np.ones((8, 4), np.float32)
    B = np.ones((6, 4), np.float32)
    out = np.empty(S.nnz, np.float32)
    n = 20000
    for _ in range(100):
        mfact.sddmm(Mtiny, A, B, out=out, ctx=ctx)
    t = time.perf_counter()
    for _ in range(n):
        mfact.sddmm(Mtiny, A, B, out=out, ctx=ctx)
    ours = (time.perf_counter() - t) / n
    h, pA, pB, pO = ctx.handle, A.ctypes.data, B.ctypes.data, out.ctypes.data
    f = _lib.mf_sddmm
    t = time.perf_counter()
    for _ in range(n):
        f(h, Mtiny.handle, 4, pA, 4, pB, 4, 1.0, 0.0, pO, 0, 0)
    bare = (time.perf_counter() - t) / n
    print(f"\n| tiny sddmm (8 x 6, k = 4, host arrays) | per call |\n|---|---|\n"
          f"| mfact.sddmm | {1e6 * ours:.1f} us |\n| the C call alone (ctypes) | "
          f"{1e6 * bare:.1f} us |\n| binding adds | {1e6 * (ours - bare):.1f} us |")


if __name__ == "__main__":
    main()
