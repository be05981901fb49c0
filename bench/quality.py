#!/usr/bin/env python3
"""Test RMSE of mfact's ALS and SGD beside Surprise's SVD and cmfrec's ALS, in one run, on
one split.

Every method sees the same training and test ratings: this script splits each file by the
rule of `mfact als|sgd FILE --test-fraction F --seed S` (see split_mask, which must match
cli/ratings.c) and checks the train and test counts the CLI prints against its own. The
peers (Surprise, cmfrec) run on this machine's CPU; mfact runs through its CLI on the CPU
and, where `mfact info` reports a usable GPU, on the GPU.

Acceptance (issue 21): with default settings mfact ALS and mfact SGD each reach a test RMSE
at or below the best of Surprise's SVD (defaults) and cmfrec's ALS (lambda in {1, 5, 15,
30}, k in {10, 32}); `--auto` at least as good.

Exit status: 0 (also on FAIL unless --strict), 1 on FAIL with --strict, 2 when mfact's
split differs from this script's, 77 when a Python package is missing.
"""
import argparse
import glob
import json
import math
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA = [
    os.path.normpath(os.path.join(REPO, "..", "shared", "data", "ratings", name))
    for name in ("ml-100k.tsv", "filmtrust.txt")
]
CMFREC_LAMBDAS = (1.0, 5.0, 15.0, 30.0)
CMFREC_KS = (10, 32)
SEED = 1
RANDOM_STATE = 1  # the peers' own seed

try:
    import numpy as np
except ImportError:
    np = None


def need_packages(peers=True):
    """Exit 77 (skipped) with the pip line when a package is missing."""
    missing = []
    mods = [("numpy", "numpy")]
    if peers:
        mods += [("surprise", "scikit-surprise"), ("cmfrec", "cmfrec"),
                 ("threadpoolctl", "threadpoolctl")]
    for mod, pkg in mods:
        try:
            __import__(mod)
        except ImportError:
            missing.append(pkg)
    if missing:
        print("quality.py: missing Python packages: %s" % ", ".join(missing), file=sys.stderr)
        print("  pip install scikit-surprise cmfrec numpy threadpoolctl", file=sys.stderr)
        print("  (cmfrec imports threadpoolctl without declaring it)", file=sys.stderr)
        sys.exit(77)


# ---------------------------------------------------------------------------------------
# Reading and splitting: both must match the library and the CLI.


def load_ratings(path):
    """(rows, cols, values, shape) as mf_sparse_read reads a triplet file: "row col value
    [ignored...]" per line, '#' or '%' comments; index base 0 when any row or column index
    in the file is 0, else 1; shape = 1 + the largest index; a repeated (row, col) keeps the
    value of its last line (as the CLI does with --test-fraction)."""
    users, items, vals = [], [], []
    with open(path) as f:
        for line in f:
            s = line.strip()
            if not s or s[0] in "#%":
                continue
            p = s.replace(",", " ").replace("::", " ").split()
            try:
                u, i, v = int(p[0]), int(p[1]), float(p[2])
            except (ValueError, IndexError):
                if not users:  # a header line
                    continue
                raise ValueError("%s: cannot read line %r" % (path, line))
            users.append(u), items.append(i), vals.append(v)
    r = np.array(users, dtype=np.int64)
    c = np.array(items, dtype=np.int64)
    v = np.array(vals, dtype=np.float64)
    base = 0 if (r.min() == 0 or c.min() == 0) else 1
    r -= base
    c -= base
    shape = (int(r.max()) + 1, int(c.max()) + 1)
    # The last line of each repeated (row, col) wins: a stable sort by key, keep each run's
    # final element, then back to file order.
    key = r * shape[1] + c
    order = np.argsort(key, kind="stable")
    ks = key[order]
    last = np.ones(len(ks), dtype=bool)
    last[:-1] = ks[1:] != ks[:-1]
    keep = np.sort(order[last])
    return r[keep], c[keep], v[keep], shape


GOLDEN = 0x9E3779B97F4A7C15


def split_mask(r, c, seed, fraction):
    """True where rating (r, c) is held out. THIS MUST MATCH cli/ratings.c (mfact als|sgd
    --test-fraction F --seed S): x = (r << 32) | c; z = x ^ (S * golden); the splitmix64
    finalizer on z; held out iff (z >> 11) * 2^-53 < F. A rating's side depends only on its
    (row, col) and the seed, not on the file's order or on the other ratings."""
    with np.errstate(over="ignore"):
        x = (r.astype(np.uint64) << np.uint64(32)) | c.astype(np.uint64)
        s = np.uint64((seed * GOLDEN) & 0xFFFFFFFFFFFFFFFF)
        z = x ^ s
        z = z + np.uint64(GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) * 2.0**-53 < fraction


class Split:
    def __init__(self, path, fraction, seed):
        self.path, self.name = path, os.path.basename(path)
        r, c, v, self.shape = load_ratings(path)
        test = split_mask(r, c, seed, fraction)
        self.tr = (r[~test], c[~test], v[~test])
        self.te = (r[test], c[test], v[test])
        self.lo, self.hi = float(v.min()), float(v.max())


def rmse(pred, truth):
    return float(np.sqrt(np.mean((np.asarray(pred, dtype=np.float64) - truth) ** 2)))


# ---------------------------------------------------------------------------------------
# Peers


def surprise_trainset(sp):
    from surprise import Dataset, Reader
    import pandas as pd

    r, c, v = sp.tr
    df = pd.DataFrame({"u": r, "i": c, "r": v})
    data = Dataset.load_from_df(df, Reader(rating_scale=(sp.lo, sp.hi)))
    return data.build_full_trainset()


def surprise_predict(algo, trainset, sp, clip):
    """Surprise's own predict (est = mu + the known biases + the factor term when both are
    known), clipped to the rating scale as Surprise's test() does when clip is true."""
    r, c, v = sp.te
    out = np.empty(len(v))
    for t in range(len(v)):
        out[t] = algo.predict(int(r[t]), int(c[t]), clip=clip).est
    return out


def run_surprise(sp, which):
    import surprise

    trainset = surprise_trainset(sp)
    if which == "svd":  # Surprise's defaults: biased, 100 factors, 20 epochs, lr 0.005, reg 0.02
        algo = surprise.SVD(random_state=RANDOM_STATE)
    else:  # BaselineOnly: mu + b_u + b_i by ALS, Surprise's defaults
        algo = surprise.BaselineOnly(verbose=False)
    t0 = time.perf_counter()
    algo.fit(trainset)
    secs = time.perf_counter() - t0
    clipped = rmse(surprise_predict(algo, trainset, sp, True), sp.te[2])
    raw = rmse(surprise_predict(algo, trainset, sp, False), sp.te[2])
    return clipped, raw, secs


def run_cmfrec(sp, k, lam):
    """cmfrec's explicit-feedback CMF by ALS with user and item biases, its other settings
    left at their defaults (centering, unscaled lambda, conjugate gradient, 10 iterations).
    X is passed as COO with the full shape. cmfrec 3.5 leaves a bias of 1.0 (and small
    factors) on a user or item without training ratings, so its predict() is off for such
    pairs; they get what Surprise predicts for them instead: the global mean plus the
    bias of the side that has ratings, no factor term. Returns (RMSE, RMSE of cmfrec's own
    predict() everywhere, seconds)."""
    import cmfrec
    from scipy.sparse import coo_matrix

    r, c, v = sp.tr
    X = coo_matrix((v, (r, c)), shape=sp.shape)
    model = cmfrec.CMF(k=k, lambda_=lam, method="als", user_bias=True, item_bias=True,
                       random_state=RANDOM_STATE, verbose=False, nthreads=-1)
    t0 = time.perf_counter()
    model.fit(X)
    secs = time.perf_counter() - t0
    tr, tc, tv = sp.te
    own = np.asarray(model.predict(tr, tc), dtype=np.float64)
    seen_u = np.bincount(r, minlength=sp.shape[0])[tr] > 0
    seen_i = np.bincount(c, minlength=sp.shape[1])[tc] > 0
    cold = ~(seen_u & seen_i)
    pred = own.copy()
    pred[cold] = (model.glob_mean_ + np.where(seen_u, model.user_bias_[tr], 0.0) +
                  np.where(seen_i, model.item_bias_[tc], 0.0))[cold]
    return rmse(pred, tv), rmse(own, tv), secs


# ---------------------------------------------------------------------------------------
# mfact through its CLI


def find_mfact(explicit):
    if explicit:
        return explicit
    for cand in [os.path.join(REPO, "build", "cli", "mfact")] + sorted(
            glob.glob(os.path.join(REPO, "build*", "cli", "mfact"))):
        if os.access(cand, os.X_OK):
            return cand
    return None


def mfact_has_gpu(mfact):
    try:
        out = subprocess.run([mfact, "info", "--json"], capture_output=True, text=True,
                             timeout=120)
        return out.returncode == 0 and json.loads(out.stdout).get("backend") == "cuda"
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return False


def run_mfact(mfact, algo, sp, fraction, seed, backend, auto):
    """One `mfact als|sgd FILE --test-fraction F --seed S --backend B [--auto] --json`:
    a dict with the test RMSE, seconds and the split's counts, or {"error": why}."""
    cmd = [mfact, algo, sp.path, "--test-fraction", repr(fraction), "--seed", str(seed),
           "--backend", backend, "--json"] + (["--auto"] if auto else [])
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    except subprocess.TimeoutExpired:
        return {"error": "timed out"}
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        msg = (out.stderr.strip().splitlines() or ["exit %d" % out.returncode])[-1]
        if auto and "--auto" in msg:
            msg = "this mfact has no --auto"
        return {"error": msg}
    lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
    res = json.loads(lines[-1]) if lines else {}
    got = {"wall": wall, "seconds": res.get("seconds", wall),
           "train": res.get("train_ratings"), "test": res.get("test_ratings"),
           "rmse": res.get("test_RMSE")}
    if got["rmse"] is None:  # no key: the last progress line's "test RMSE x"
        for line in reversed(out.stderr.splitlines()):
            if "test RMSE" in line:
                got["rmse"] = float(line.split("test RMSE")[1].split()[0].rstrip(","))
                break
    return got


# ---------------------------------------------------------------------------------------
# Tables


def fmt(x, spec="%.4f"):
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else spec % x


def margin(x, best):
    if x is None or best is None:
        return "n/a"
    return "%+.4f (%+.2f%%)" % (x - best, 100.0 * (x - best) / best)


def count_cold(sp):
    """Test ratings whose user or item has no training rating."""
    nu = np.bincount(sp.tr[0], minlength=sp.shape[0])
    ni = np.bincount(sp.tr[1], minlength=sp.shape[1])
    return int(np.sum((nu[sp.te[0]] == 0) | (ni[sp.te[1]] == 0)))


def run_peers(sp, quick, log):
    peers = {}
    log("  Surprise SVD (defaults) ...")
    peers["svd"] = run_surprise(sp, "svd")
    if not quick:
        log("  Surprise BaselineOnly ...")
        peers["baseline"] = run_surprise(sp, "baseline")
    grid = {}
    ks = CMFREC_KS
    lambdas = CMFREC_LAMBDAS
    for k in ks:
        for lam in lambdas:
            log("  cmfrec ALS k=%d lambda=%g ..." % (k, lam))
            grid[(k, lam)] = run_cmfrec(sp, k, lam)
    peers["cmfrec"] = grid
    return peers


def main():
    ap = argparse.ArgumentParser(
        description="Test RMSE of mfact ALS and SGD beside Surprise SVD and cmfrec ALS on "
        "one split (issue 21).")
    ap.add_argument("files", nargs="*", help="ratings files (default: MovieLens 100K and "
                    "FilmTrust from ../shared/data/ratings)")
    ap.add_argument("--fraction", type=float, default=0.2, help="held-out fraction (0.2)")
    ap.add_argument("--seed", type=int, default=SEED, help="split seed (%d)" % SEED)
    ap.add_argument("--mfact", help="the mfact CLI (default: build*/cli/mfact)")
    ap.add_argument("--backend", choices=["cpu", "cuda", "both"],
                    help="mfact's backends (default: cpu, plus cuda when `mfact info` says "
                    "a GPU is usable)")
    ap.add_argument("--peers-only", action="store_true", help="skip mfact")
    ap.add_argument("--quick", action="store_true", help="skip BaselineOnly")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a data set FAILs")
    args = ap.parse_args()
    need_packages()

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    mfact = None
    backends = []
    if not args.peers_only:
        mfact = find_mfact(args.mfact)
        if not mfact:
            log("quality.py: no mfact CLI (build it: cmake -S . -B build && cmake --build "
                "build, or pass --mfact PATH); the table has the peers only")
        else:
            gpu = args.backend in ("cuda", "both") or (args.backend is None and
                                                       mfact_has_gpu(mfact))
            backends = {"cpu": ["cpu"], "cuda": ["cuda"], "both": ["cpu", "cuda"],
                        None: ["cpu"] + (["cuda"] if gpu else [])}[args.backend]

    files = args.files or DEFAULT_DATA
    from importlib.metadata import version

    print("Peers: Surprise %s, cmfrec %s, NumPy %s, on this machine's CPU (%d cores). mfact: "
          "%s%s.\n" % (version("scikit-surprise"), version("cmfrec"),
                       np.__version__, os.cpu_count() or 0, mfact or "not run",
                       " (" + ", ".join(backends) + ")" if backends else ""))
    verdicts, mismatch = [], False
    for path in files:
        if not os.path.exists(path):
            print("note: %s is missing; skipped\n" % os.path.normpath(path))
            continue
        sp = Split(path, args.fraction, args.seed)
        ntr, nte = len(sp.tr[2]), len(sp.te[2])
        log("%s: %d x %d, %d train, %d test" % (sp.name, sp.shape[0], sp.shape[1], ntr, nte))
        peers = run_peers(sp, args.quick, log)
        rows = []  # (method, rmse, seconds, note)
        svd_clip, svd_raw, svd_s = peers["svd"]
        rows.append(("Surprise SVD (defaults)", svd_clip, svd_s,
                     "clipped to [%g, %g] as Surprise does; %.4f unclipped" %
                     (sp.lo, sp.hi, svd_raw)))
        grid = peers["cmfrec"]
        (bk, bl), (best_c, best_c_own, best_c_s) = min(grid.items(), key=lambda kv: kv[1][0])
        cold = count_cold(sp)
        rows.append(("cmfrec ALS best (k=%d, lambda=%g)" % (bk, bl), best_c, best_c_s,
                     "%d test ratings of unseen users or items get mean + bias; cmfrec's own "
                     "predict(): %.4f" % (cold, best_c_own)))
        best_peer = min(svd_clip, best_c)
        if "baseline" in peers:
            rows.append(("Surprise BaselineOnly (reference)", peers["baseline"][0],
                         peers["baseline"][2], "biases only; not a peer of the rule"))
        mf = {}
        for be in backends:
            for algo in ("als", "sgd"):
                for auto in (False, True):
                    log("  mfact %s%s --backend %s ..." % (algo, " --auto" if auto else "",
                                                          be))
                    res = run_mfact(mfact, algo, sp, args.fraction, args.seed, be, auto)
                    label = "mfact %s %s (%s)" % (algo.upper(), "--auto" if auto else
                                                  "defaults", be)
                    if "error" in res:
                        mf[(be, algo, auto)] = None
                        rows.append((label, None, None, "n/a: " + res["error"]))
                        continue
                    note = "%s train / %s test" % (res["train"], res["test"])
                    if (res["train"], res["test"]) != (ntr, nte):
                        note += " (SPLIT MISMATCH)"
                        print("!!! SPLIT MISMATCH on %s: mfact %s has %s train / %s test, "
                              "this script %d / %d: the CLI's split rule and split_mask "
                              "differ !!!" % (sp.name, algo, res["train"], res["test"],
                                              ntr, nte))
                        mismatch = True
                    mf[(be, algo, auto)] = res["rmse"]
                    rows.append((label, res["rmse"], res["seconds"], note))

        print("### %s (%d x %d, %d train / %d test ratings, fraction %g, seed %d)\n" %
              (sp.name, sp.shape[0], sp.shape[1], ntr, nte, args.fraction, args.seed))
        print("| method | test RMSE | seconds | vs best peer | note |")
        print("|---|---|---|---|---|")
        for name, e, s, note in rows:
            print("| %s | %s | %s | %s | %s |" % (name, fmt(e), fmt(s, "%.2f"),
                                                 margin(e, best_peer), note))
        print("\ncmfrec ALS grid (test RMSE; in brackets cmfrec's own predict() for the "
              "unseen users and items):\n")
        print("| k | " + " | ".join("lambda %g" % l for l in CMFREC_LAMBDAS) + " |")
        print("|---|" + "---|" * len(CMFREC_LAMBDAS))
        for k in CMFREC_KS:
            print("| %d | " % k + " | ".join("%s (%s)" % (fmt(grid[(k, l)][0]), fmt(grid[(k, l)][1]))
                                          for l in CMFREC_LAMBDAS) + " |")
        print()
        if backends:
            for be in backends:
                ok = True
                why = []
                for algo in ("als", "sgd"):
                    d, a = mf[(be, algo, False)], mf[(be, algo, True)]
                    if d is None or d > best_peer:
                        ok = False
                        why.append("%s defaults %s" % (algo.upper(), fmt(d)))
                    if a is None:
                        why.append("%s --auto n/a" % algo.upper())
                    elif a > best_peer:
                        ok = False
                        why.append("%s --auto %s" % (algo.upper(), fmt(a)))
                verdict = "PASS" if ok else "FAIL"
                verdicts.append(verdict)
                print("**%s** %s (%s): best peer %.4f%s\n" %
                      (verdict, sp.name, be, best_peer,
                       "; " + ", ".join(why) if why else ""))
        sys.stdout.flush()
    if mismatch:
        print("SPLIT MISMATCH: the numbers above do not compare like with like")
        return 2
    if args.strict and "FAIL" in verdicts:
        return 1
    return 0


if __name__ == "__main__":
    if np is None:
        need_packages(False)
    sys.exit(main())
