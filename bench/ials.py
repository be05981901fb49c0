#!/usr/bin/env python3
"""mfact.ImplicitALS (on the GPU) against implicit's CPU ALS
(implicit.cpu.als.AlternatingLeastSquares, benfred/implicit) in one run, on the same data,
split and hyperparameters. Not a test: a benchmark that prints one markdown table.

For each rank: seconds per iteration of both fits (each library's iterations alone, their
total over the iterations: mfact's report iteration_seconds after a 1-iteration warm-up fit
that pays the uploads and the kernels' first loads; implicit's fit callback, its median
printed too), precision@10 / NDCG@10 / MAP / AUC of both models by implicit's
ranking_metrics_at_k on the held-out part (mfact's factors wrapped in an implicit model) and
by mfact.ranking_metrics (printed beside them to cross-check the two evaluators), both
models' training loss by implicit's own loss function, and top-10 recommendations for every
user, the training items left out (mfact: ImplicitALS.recommend on its device factors,
median of 3 after a warm-up; implicit: model.recommend(userids, train[userids]) once, or on
a --peer-sample fraction of the users and extrapolated, which the output says).

The same objective on both sides: mfact's confidence is c = 1 + alpha r (confidence
"linear"; or 1 + alpha log(1 + r / epsilon)), while implicit >= 0.5 takes c = alpha * value
(its fit multiplies the matrix by alpha, and its solvers use the stored value itself as the
confidence). implicit is therefore given the matrix of confidences 1 + alpha r with its own
alpha = 1: both minimise sum c (p - x.y)^2 + lambda (|X|^2 + |Y|^2) over all pairs. Both
start from factors uniform in [0, 0.01) (different generators). implicit runs on all cores
(num_threads=0) with BLAS limited to one thread (implicit's own advice, through
threadpoolctl).

Data: a synthetic generator (presets below; --scale shrinks users and interactions, items
by min(1, 4 scale), as bench_ials does), or --data DIR, the split `bench_ials --write DIR`
saved (train.{indptr,indices,data}, test.*, shape.txt), so that bench_ials (C) and this
script measure the same interactions. Generated interactions are play counts >= 1: users
have a log-normal or Zipf number of items (capped), items a Zipf or log-normal popularity
(capped at a share of the users), and a planted taste: each user belongs to one of --groups
groups and draws --taste of its items from its group's items (by their popularity), the
rest from all items; taste draws are played more. Each user's draws are deduplicated (the
first draw of a pair kept); 20% of the pairs (a seeded hash of the pair) are held out.

    python3 bench/ials.py --case lastfm --rank 64,128
    python3 bench/ials.py --case 1m --peer-sample 0.1 --eval-users 100000
    python3 bench/ials.py --case lastfm --scale 0.01 --backend auto   # a quick check anywhere
"""
import argparse
import concurrent.futures
import os
import sys
import time

import numpy as np
import scipy.sparse as sp

PRESETS = {
    # lastfm-360k's shape (implicit's benchmark data set): its users keep their top 50
    # artists, so users vary little; artists follow a power law with a long tail. The laws
    # and caps are bench_ials's "lastfm" preset.
    "lastfm": dict(users=358_868, items=292_385, nnz=17_500_000, user_law="lognormal",
                   user_skew=0.3, user_cap=100 / 292_385, item_law="zipf", item_skew=1.1,
                   item_cap=0.2),
    # The large implicit case: bench_ials's "implicit-1m".
    "1m": dict(users=1_000_000, items=100_000, nnz=100_000_000, user_law="lognormal",
               user_skew=1.0, user_cap=0.05, item_law="zipf", item_skew=1.0, item_cap=0.3),
}
PRESETS["implicit-1m"] = PRESETS["1m"]
CHUNK = 1 << 16  # users per generator chunk: fixed, so the data do not depend on the threads


# ---- the data -----------------------------------------------------------------------------

def law(n, name, skew, rng):
    """Weights of n things: Zipf (rank r weighs r^-skew; ranks a seeded permutation, so that
    popularity is not ordered by id) or log-normal with sigma skew."""
    if name == "zipf":
        return rng.permutation(np.arange(1, n + 1, dtype=np.float64) ** -skew)
    return rng.lognormal(0.0, skew, n)


def capped(p, cap):
    """The distribution p with no entry above cap, the excess spread over the others in
    proportion (water-filling)."""
    p = p / p.sum()
    if cap <= 0 or cap >= 1:
        return p
    for _ in range(100):
        over = p > cap * (1 + 1e-12)
        if not over.any():
            break
        excess = (p[over] - cap).sum()
        p[over] = cap
        free = p < cap
        p[free] += excess * p[free] / p[free].sum()
    return p


def splitmix(x):
    """A 64-bit hash of each element (uint64 arithmetic wraps)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def generate(users, items, nnz, user_law, user_skew, user_cap, item_law, item_skew, item_cap,
             groups, taste, heldout, seed, threads):
    """(train, test): CSR play counts (float32 >= 1), users x items, about nnz pairs in all.
    user_cap: a user's items at most (a count; 0: items); item_cap: an item's users at most
    this share of the users (0: none)."""
    rng = np.random.default_rng([seed, 0])
    # Degrees: the user law with the target's mean, capped, at least 1.
    cap_u = min(user_cap, items) if user_cap > 0 else items
    pu = capped(law(users, user_law, user_skew, rng), cap_u / nnz)
    exact = pu * nnz
    deg = np.floor(exact).astype(np.int64)
    deg += rng.random(users) < exact - deg
    deg = np.clip(deg, 1, int(min(cap_u, items))).astype(np.int64)
    # Items: global popularity, and the same restricted to each group (for taste draws).
    pi = capped(law(items, item_law, item_skew, rng), item_cap * users / nnz
                if item_cap > 0 else 1.0)
    cdf = np.cumsum(pi)
    cdf /= cdf[-1]
    groups = max(1, min(groups, items))
    item_group = rng.integers(groups, size=items)
    user_group = rng.integers(groups, size=users)
    order = np.argsort(item_group, kind="stable")
    g_sorted = item_group[order]
    cs = np.cumsum(pi[order])
    start = np.searchsorted(g_sorted, np.arange(groups))
    end = np.searchsorted(g_sorted, np.arange(groups), side="right")
    before = np.where(start > 0, cs[np.maximum(start - 1, 0)], 0.0)
    total = np.where(end > start, cs[np.maximum(end - 1, 0)] - before, 1.0)
    gcdf = g_sorted + (cs - before[g_sorted]) / total[g_sorted]  # group g: (g, g + 1]

    def chunk(c):
        lo, hi = c * CHUNK, min(users, (c + 1) * CHUNK)
        r = np.random.default_rng([seed, 1, c])
        want = deg[lo:hi]
        need = want.copy()
        keys = np.empty(0, np.int64)
        for _ in range(8):  # draw what is missing until the duplicates are replaced
            if need.sum() == 0:
                break
            u = np.repeat(np.arange(lo, hi, dtype=np.int64), need)
            pick = r.random(u.size) < taste
            it = np.empty(u.size, np.int64)
            it[~pick] = np.searchsorted(cdf, r.random(int((~pick).sum())), side="right")
            pos = np.searchsorted(gcdf, user_group[u[pick]] + r.random(int(pick.sum())),
                                  side="right")
            it[pick] = order[np.minimum(pos, items - 1)]
            np.minimum(it, items - 1, out=it)
            # Plays: 1 + a log-normal count, more for taste draws; packed under the pair's
            # key so that one sort orders and deduplicates (the first draw of a pair kept).
            plays = 1 + np.floor(r.lognormal(0.5 + pick, 1.0))
            code = np.minimum(plays, 65535).astype(np.int64)
            new = ((u * items + it) << 16) | code
            keys = np.concatenate([keys, new])
            keys.sort()
            pair = keys >> 16
            first = np.ones(keys.size, bool)
            first[1:] = pair[1:] != pair[:-1]
            keys = keys[first]
            have = np.bincount((keys >> 16) // items - lo, minlength=hi - lo)
            need = np.maximum(want - have, 0)
        return keys

    n_chunks = (users + CHUNK - 1) // CHUNK
    with concurrent.futures.ThreadPoolExecutor(max(1, threads)) as pool:
        parts = list(pool.map(chunk, range(n_chunks)))
    keys = np.concatenate(parts)
    del parts
    vals = (keys & 0xFFFF).astype(np.float32)
    pair = keys >> 16
    del keys
    salt = np.uint64((seed * 0x632BE59BD9B4E019 + 1) % 2**64)
    test = (splitmix(pair.view(np.uint64) ^ salt) % np.uint64(1 << 20)) < \
        np.uint64(int(heldout * (1 << 20)))
    u = (pair // items).astype(np.int32)
    i = (pair % items).astype(np.int32)
    del pair
    return to_csr(u, i, vals, ~test, users, items), to_csr(u, i, vals, test, users, items)


def to_csr(u, i, v, mask, users, items):
    """The masked pairs (sorted by user, then item) as a CSR matrix."""
    u, i, v = u[mask], i[mask], v[mask]
    indptr = np.zeros(users + 1, np.int64)
    np.cumsum(np.bincount(u, minlength=users), out=indptr[1:])
    if indptr[-1] < 2**31:
        indptr = indptr.astype(np.int32)
    return sp.csr_matrix((v, i, indptr), shape=(users, items))


def load_split(d):
    """The split `bench_ials --write DIR` saved."""
    with open(os.path.join(d, "shape.txt")) as f:
        users, items = (int(x) for x in f.read().split())

    def part(name):
        indptr = np.fromfile(os.path.join(d, name + ".indptr"), np.int64)
        indices = np.fromfile(os.path.join(d, name + ".indices"), np.int32)
        data = np.fromfile(os.path.join(d, name + ".data"), np.float32)
        if indptr[-1] < 2**31:
            indptr = indptr.astype(np.int32)
        return sp.csr_matrix((data, indices, indptr), shape=(users, items))

    return part("train"), part("test")


def describe(train, test):
    both = (train + test).tocsr()
    per_item = np.bincount(both.indices, minlength=both.shape[1])
    per_user = np.diff(both.indptr)
    return (f"{both.shape[0]:,} users x {both.shape[1]:,} items, {both.nnz:,} pairs "
            f"({train.nnz:,} train, {test.nnz:,} held out); most played item "
            f"{per_item.max():,} users ({100 * per_item.max() / both.shape[0]:.1f}%), median "
            f"item {int(np.median(per_item))}, items with no pair {np.mean(per_item == 0):.1%}; "
            f"users: median {int(np.median(per_user))}, max {per_user.max():,}; "
            f"mean value {both.data.mean():.2f}")


# ---- the runs -----------------------------------------------------------------------------

def confidence(values, args):
    if args.confidence == "log":
        return 1.0 + args.alpha * np.log1p(values / args.epsilon)
    return 1.0 + args.alpha * values


def implicit_model(rank, args, threads):
    from implicit.cpu.als import AlternatingLeastSquares
    m = AlternatingLeastSquares(factors=rank, regularization=args.lambda_, alpha=1.0,
                                use_cg=args.solver != "exact", iterations=args.iterations,
                                calculate_training_loss=False, num_threads=threads,
                                random_state=args.seed)
    m.cg_steps = args.cg_steps
    return m


def host(a):
    if isinstance(a, np.ndarray):
        return a
    if type(a).__module__.split(".")[0] == "torch":
        return a.cpu().numpy()
    import cupy
    return cupy.asnumpy(a)


def timed(fn, repeat=1):
    runs = []
    out = None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        runs.append(time.perf_counter() - t)
    return float(np.median(runs)), out


def run_rank(rank, train, test, conf_train, args, ctx, fit_input, log):
    """One row of the table."""
    import mfact
    users, items = train.shape
    row = {"rank": rank}
    kw = dict(rank=rank, lambda_=args.lambda_, alpha=args.alpha, confidence=args.confidence,
              epsilon=args.epsilon, solver=args.solver, cg_steps=args.cg_steps, ctx=ctx)
    mfact.ImplicitALS(iterations=1, **kw).fit(fit_input)  # warm-up: uploads, first launches
    t = time.perf_counter()
    ours = mfact.ImplicitALS(iterations=args.iterations, **kw).fit(fit_input)
    wall = time.perf_counter() - t
    rep = ours.report
    row["mfact_iter"] = rep["iteration_seconds"] / rep["iterations"]
    log(f"  mfact rank {rank}: {rep['iterations']} iterations, {rep['solver']} solver, "
        f"{row['mfact_iter']:.4f} s/iteration (report: iterations {rep['iteration_seconds']:.3f}"
        f" s, call {rep['seconds']:.3f} s; fit wall {wall:.3f} s), peak device "
        f"{rep['peak_device_bytes'] / 2**30:.2f} GiB")
    U, V = host(ours.user_factors), host(ours.item_factors)
    row["own_metrics"] = mfact.ranking_metrics(ours, train, test, K=10)
    log(f"  mfact.ranking_metrics(mfact):              {fmt(row['own_metrics'])}")
    # Top 10 for every user, the training items left out (the matrix kept from fit).
    all_users = np.arange(users, dtype=np.int32)
    ours.recommend(all_users[:1024], N=10)
    row["mfact_rec"], (ids_ours, _) = timed(lambda: ours.recommend(all_users, N=10), 3)
    log(f"  mfact recommend, {users:,} users, N = 10: {row['mfact_rec']:.3f} s (median of 3)")
    row["mfact_metrics"] = row["peer_metrics"] = None
    if not args.skip_peer:
        from implicit.evaluation import ranking_metrics_at_k
        from implicit.cpu import _als
        from threadpoolctl import threadpool_limits
        threads = args.peer_threads
        with threadpool_limits(1, "blas"):
            peer = implicit_model(rank, args, threads)
            times = []
            t = time.perf_counter()
            peer.fit(conf_train, show_progress=False,
                     callback=lambda it, elapsed, loss: times.append(elapsed))
            wall = time.perf_counter() - t
            row["peer_iter"] = float(np.sum(times) / len(times))
            log(f"  implicit rank {rank}: {len(times)} iterations, "
                f"{'CG ' + str(args.cg_steps) + ' steps' if args.solver != 'exact' else 'exact'}"
                f", {row['peer_iter']:.4f} s/iteration (mean; median "
                f"{np.median(times):.4f}; fit wall {wall:.3f} s)")
            wrapped = implicit_model(rank, args, threads)
            wrapped.user_factors, wrapped.item_factors = U, V
            row["mfact_metrics"] = ranking_metrics_at_k(wrapped, train, test, K=10,
                                                        show_progress=False, num_threads=0)
            row["peer_metrics"] = ranking_metrics_at_k(peer, train, test, K=10,
                                                       show_progress=False, num_threads=0)
            log(f"  implicit's ranking_metrics_at_k(mfact):    {fmt(row['mfact_metrics'])}")
            log(f"  implicit's ranking_metrics_at_k(implicit): {fmt(row['peer_metrics'])}")
            theirs_by_us = mfact.ranking_metrics((peer.user_factors, peer.item_factors), train,
                                                 test, K=10, ctx=ctx)
            log(f"  mfact.ranking_metrics(implicit):           {fmt(theirs_by_us)}")
            loss = lambda X, Y: _als.calculate_loss(conf_train, X, Y, args.lambda_,
                                                    num_threads=threads)
            log(f"  training loss (implicit's calculate_loss): mfact {loss(U, V):.6g}, "
                f"implicit {loss(peer.user_factors, peer.item_factors):.6g}")
            # Top 10 for every user (or a sample, extrapolated), the same exclusions.
            rng = np.random.default_rng(args.seed)
            if args.peer_sample < 1.0:
                sample = np.sort(rng.choice(users, max(1, int(args.peer_sample * users)),
                                            replace=False)).astype(np.int32)
            else:
                sample = np.arange(users, dtype=np.int32)
            liked = train[sample]
            peer.recommend(sample[:1024], liked[:1024], N=10)
            secs, (ids_peer, _) = timed(lambda: peer.recommend(sample, liked, N=10))
            row["peer_rec"] = secs * users / sample.size
            row["peer_rec_note"] = "" if sample.size == users else \
                f" (extrapolated from {sample.size:,} users: {secs:.3f} s)"
            log(f"  implicit recommend, N = 10: {row['peer_rec']:.3f} s for {users:,} users"
                f"{row['peer_rec_note']}")
            # The lists of both libraries from mfact's factors, on a sample of users.
            check = sample[:: max(1, sample.size // 2000)]
            mine = host(ids_ours)[check]
            theirs, _ = wrapped.recommend(check, train[check], N=10)
            same = np.mean([(a == b).all() for a, b in zip(mine, theirs)])
            overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(mine, theirs)])
            log(f"  top-10 from mfact's factors, mfact vs implicit's recommend, {check.size:,}"
                f" users: {same:.1%} identical lists, {overlap:.1%} overlap")
    return row


def fmt(m):
    return ", ".join(f"{k} {m[k]:.4f}" for k in ("precision", "ndcg", "map", "auc"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", default="lastfm", choices=sorted(PRESETS) + ["custom"])
    ap.add_argument("--data", help="a split saved by bench_ials --write DIR (replaces --case)")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--users", type=int)
    ap.add_argument("--items", type=int)
    ap.add_argument("--nnz", type=float, help="target pairs before the split")
    ap.add_argument("--user-law", choices=["lognormal", "zipf"])
    ap.add_argument("--user-skew", type=float, help="log-normal sigma or Zipf exponent")
    ap.add_argument("--user-cap", type=float,
                    help="a user's items at most this share of the (unscaled) items")
    ap.add_argument("--item-law", choices=["lognormal", "zipf"])
    ap.add_argument("--item-skew", type=float, help="log-normal sigma or Zipf exponent")
    ap.add_argument("--item-cap", type=float, help="an item's users at most this share of users")
    ap.add_argument("--groups", type=int, default=50, help="planted taste groups")
    ap.add_argument("--taste", type=float, default=0.5, help="share of draws from the group")
    ap.add_argument("--heldout", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rank", default="64", help="one rank or a list: 64,128")
    ap.add_argument("--iterations", type=int, default=15)
    ap.add_argument("--alpha", type=float, default=1.0)
    ap.add_argument("--lambda", dest="lambda_", type=float, default=0.01)
    ap.add_argument("--confidence", choices=["linear", "log"], default="linear")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--solver", choices=["auto", "cg", "exact"], default="cg")
    ap.add_argument("--cg-steps", type=int, default=3)
    ap.add_argument("--backend", default="cuda", help="mfact's: cuda, cpu or auto")
    ap.add_argument("--input", choices=["device", "host"],
                    help="mfact's fit input: a CuPy matrix (factors stay on the device; the "
                         "default with CuPy and a CUDA context) or the SciPy one")
    ap.add_argument("--peer-sample", type=float, default=1.0,
                    help="share of the users implicit's recommend-all is timed on "
                         "(extrapolated to all)")
    ap.add_argument("--peer-threads", type=int, default=0, help="implicit's; 0: all cores")
    ap.add_argument("--eval-users", type=int, default=0,
                    help="score the metrics on this many held-out users (a seeded sample, "
                         "the same for both); 0: all")
    ap.add_argument("--skip-peer", action="store_true", help="mfact alone")
    args = ap.parse_args()
    log = lambda s: print(s, flush=True)
    cores = os.cpu_count() or 1

    import mfact
    ctx = mfact.Context(backend=args.backend, seed=args.seed)
    t = time.perf_counter()
    if args.data:
        train, test = load_split(args.data)
        label = os.path.basename(os.path.normpath(args.data))
    else:
        p = dict(PRESETS.get(args.case, PRESETS["lastfm"]))
        for key in ("users", "items", "nnz", "user_law", "user_skew", "user_cap", "item_law",
                    "item_skew", "item_cap"):
            if getattr(args, key) is not None:
                p[key] = getattr(args, key)
        users = max(1, int(p["users"] * args.scale))
        items = max(1, int(p["items"] * min(1.0, 4 * args.scale)))
        nnz = int(p["nnz"] * args.scale)
        # The user cap is a share of the unscaled items (lastfm: 100 artists at any scale).
        user_cap = p["user_cap"] * p["items"]
        train, test = generate(users, items, nnz, p["user_law"], p["user_skew"], user_cap,
                               p["item_law"], p["item_skew"], p["item_cap"], args.groups,
                               args.taste, args.heldout, args.seed, cores)
        label = args.case if args.scale == 1 else f"{args.case} x{args.scale:g}"
    made = time.perf_counter() - t
    log(f"data {label}: {describe(train, test)} (made in {made:.1f} s)")
    if args.eval_users and args.eval_users < test.shape[0]:
        keep = np.zeros(test.shape[0], bool)
        rows = np.flatnonzero(np.diff(test.indptr))
        keep[np.random.default_rng(args.seed).choice(rows, min(args.eval_users, rows.size),
                                                     replace=False)] = True
        test = sp.diags(keep.astype(np.float32)) @ test
        test.eliminate_zeros()
        test = test.tocsr()
        log(f"metrics on {keep.sum():,} sampled held-out users")
    conf_train = train.copy()
    conf_train.data = confidence(train.data.astype(np.float64), args).astype(np.float32)

    use_device = args.input == "device" or (args.input is None and ctx.backend == "cuda")
    fit_input = None
    if use_device:
        try:
            import cupyx.scipy.sparse as csp
            fit_input = mfact.Matrix(csp.csr_matrix(train), ctx=ctx)
        except ImportError:
            if args.input == "device":
                raise
            use_device = False
    if fit_input is None:
        fit_input = mfact.Matrix(train, ctx=ctx)
    peer_version = "skipped"
    if not args.skip_peer:
        import implicit
        peer_version = f"implicit {implicit.__version__} CPU, " \
            f"{args.peer_threads or cores} threads"
    dev = ctx.backend
    if dev == "cuda":
        try:
            import cupy
            dev = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
        except Exception:
            pass
    log(f"mfact {mfact.__version__} on {dev} ({'device' if use_device else 'host'} input); "
        f"{peer_version}; {os.cpu_count()} cores; {args.iterations} iterations, "
        f"{args.solver} solver" + (f" ({args.cg_steps} CG steps)" if args.solver != "exact"
                                   else "") +
        f", alpha {args.alpha:g} ({args.confidence}), lambda {args.lambda_:g}")
    rows = []
    for rank in (int(r) for r in str(args.rank).split(",")):
        rows.append(run_rank(rank, train, test, conf_train, args, ctx, fit_input, log))

    print()
    print("| case | rank | mfact s/iter | implicit s/iter | speed-up | p@10 mfact | "
          "p@10 implicit | ndcg@10 mfact | ndcg@10 implicit | recommend-all mfact s | "
          "recommend-all implicit s | speed-up |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    notes = []
    for r in rows:
        if r["peer_metrics"] is None:  # mfact alone: its own evaluator's numbers
            a = r["own_metrics"]
            print(f"| {label} | {r['rank']} | {r['mfact_iter']:.4f} | - | - | "
                  f"{a['precision']:.4f} | - | {a['ndcg']:.4f} | - | {r['mfact_rec']:.3f} | - "
                  f"| - |")
            continue
        a, b = r["mfact_metrics"], r["peer_metrics"]
        print(f"| {label} | {r['rank']} | {r['mfact_iter']:.4f} | {r['peer_iter']:.4f} | "
              f"{r['peer_iter'] / r['mfact_iter']:.1f}x | {a['precision']:.4f} | "
              f"{b['precision']:.4f} | {a['ndcg']:.4f} | {b['ndcg']:.4f} | "
              f"{r['mfact_rec']:.3f} | {r['peer_rec']:.3f}{'*' if r['peer_rec_note'] else ''} | "
              f"{r['peer_rec'] / r['mfact_rec']:.1f}x |")
        if r["peer_rec_note"]:
            notes.append(f"rank {r['rank']}:{r['peer_rec_note']}")
    print()
    print("s/iter: each library's iterations alone, total / iterations (mfact: the report's "
          "iteration time; implicit: its fit callback's). Metrics: implicit's "
          "ranking_metrics_at_k for both (K = 10, training items left out; without the peer, "
          "mfact.ranking_metrics). recommend-all: "
          "top 10 for every user, training items left out (mfact: median of 3).")
    for n in notes:
        print(f"* {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
