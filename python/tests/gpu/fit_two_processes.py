"""One fit over two processes, one GPU each, through torch.distributed (issue 43). Run by hand
on a machine with 2 GPUs, PyTorch and the package installed (pip install ./python):

    timeout 600 torchrun --standalone --nproc_per_node 2 python/tests/gpu/fit_two_processes.py

Every rank makes the same ratings, fits them alone (a context of its own on its GPU), then in
a group of the two processes joined each way mfact.Context.join offers a CUDA context: the
default torch.distributed group, a group of dist.new_group, the launcher's environment (a
rendezvous file) and the caller's own hand-over of an NCCL id. ALS and ImplicitALS over a
group are one context's bit for bit, so each rank's factors must equal its own fit alone;
SGD and complete() must agree between the ranks. Then the refusals: a second join, a CPU
context, one rank's wrong rank (which must fail both ranks' joins, none left waiting).

Each check prints `PASS rank R: name` or `FAIL rank R: name: why`; rank 0 ends with one line
for all; the exit status is 1 on every rank when a check failed on any. (Not collected by
pytest: the name has no test_ prefix, and CI has no GPU.)"""
import datetime
import hashlib
import os
import sys

import numpy as np
import scipy.sparse as sp
import torch
import torch.distributed as dist

import mfact

SEED = 11
USERS, ITEMS, RATINGS, K = 40_000, 8_000, 1_200_000, 32


def ratings(seed=SEED):
    """The same ratings 1..5 on every rank: a planted rank-8 model plus noise."""
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((USERS, 8)).astype(np.float32)
    V = rng.standard_normal((ITEMS, 8)).astype(np.float32)
    rows = rng.integers(0, USERS, RATINGS)
    cols = rng.integers(0, ITEMS, RATINGS)
    keep = np.unique(rows.astype(np.int64) * ITEMS + cols, return_index=True)[1]
    rows, cols = rows[keep], cols[keep]
    values = np.clip(3 + 0.5 * (U[rows] * V[cols]).sum(1) +
                     0.2 * rng.standard_normal(rows.size), 1, 5)
    return sp.csr_matrix((values.astype(np.float32), (rows, cols)), shape=(USERS, ITEMS))


def host(a):
    return a.cpu().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)


def parts(model):
    if isinstance(model, mfact.ImplicitALS):
        return [host(model.user_factors), host(model.item_factors)]
    return [host(model.user_factors), host(model.item_factors), host(model.user_biases),
            host(model.item_biases), np.float32(model.mean)]


def same(a, b):
    pa, pb = parts(a), parts(b)
    diffs = [float(np.max(np.abs(x.astype(np.float64) - y))) if x.size else 0.0
             for x, y in zip(pa, pb)]
    ok = all(np.array_equal(x, y) for x, y in zip(pa, pb))
    return ok, "" if ok else f"largest differences {diffs}"


def digest(arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(host(a)).tobytes())
    return h.hexdigest()


class Checks:
    def __init__(self, rank):
        self.rank, self.failed, self.count = rank, [], 0

    def __call__(self, name, fn):
        """fn() -> (ok, detail); an exception is a failure."""
        self.count += 1
        try:
            ok, detail = fn()
        except Exception as e:
            ok, detail = False, f"{type(e).__name__}: {e}"
        print(f"{'PASS' if ok else 'FAIL'} rank {self.rank}: {name}" +
              (f": {detail}" if detail and not ok else ""), flush=True)
        if not ok:
            self.failed.append(name)


def agree_across_ranks(arrays):
    """Whether every rank holds the same bits (a digest gathered from each)."""
    mine = digest(arrays)
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, mine)
    return all(d == every[0] for d in every), f"digests {every}"


def refused(cls, fn):
    try:
        fn()
    except cls as e:
        return True, str(e)
    except Exception as e:
        return False, f"{type(e).__name__} instead of {cls.__name__}: {e}"
    return False, "not refused"


def main():
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", timeout=datetime.timedelta(minutes=3))
    rank, size = dist.get_rank(), dist.get_world_size()
    check = Checks(rank)
    if rank == 0:
        print(f"mfact {mfact.__version__} ({mfact.build_info()}), torch {torch.__version__}, "
              f"{size} ranks", flush=True)
    R = ratings()
    als_kw = dict(rank=K, iterations=8, lambda_=0.05)
    ials_kw = dict(rank=K, iterations=6, alpha=2.0)

    alone = mfact.Context(backend="cuda", device=local, seed=SEED)
    ref = mfact.ALS(ctx=alone, **als_kw).fit(R)
    ref_ials = mfact.ImplicitALS(ctx=alone, **ials_kw).fit(R)
    ref_sgd = mfact.SGD(rank=K, epochs=10, ctx=alone).fit(R)
    check("the fits alone agree across the GPUs", lambda: agree_across_ranks(parts(ref)))
    check("the fit alone is a model", lambda: (ref.report["train_rmse"] < 0.6,
                                               f"train RMSE {ref.report['train_rmse']}"))

    # 1. torch.distributed's default group, the device from LOCAL_RANK.
    g = mfact.Context(backend="cuda", seed=SEED, process_group="torch")
    check("default group: rank, world size, device",
          lambda: ((g.rank, g.world_size, g.device) == (rank, size, local),
                   f"{(g.rank, g.world_size, g.device)}"))
    check("default group: ALS equals the fit alone",
          lambda: same(mfact.ALS(ctx=g, **als_kw).fit(R), ref))
    check("default group: ImplicitALS equals the fit alone",
          lambda: same(mfact.ImplicitALS(ctx=g, **ials_kw).fit(R), ref_ials))

    def stats_counted():
        # Two fits gathered every row a rank does not solve, over NCCL, timed by events.
        s = g.group_stats()
        return (s["calls"] > 0 and s["exchange_bytes"] > 0 and s["exchange_seconds"] > 0
                and s["wait_seconds"] > 0), f"{s}"
    check("default group: the exchanges are counted and timed", stats_counted)

    def sgd_in_group():
        m = mfact.SGD(rank=K, epochs=10, ctx=g).fit(R)
        ok, detail = agree_across_ranks(parts(m))
        # A group's epoch visits the ratings in another order than one GPU's: near, not equal.
        near = abs(m.report["train_rmse"] - ref_sgd.report["train_rmse"]) < \
            0.1 * ref_sgd.report["train_rmse"]
        return ok and near, f"{detail}; train RMSE {m.report['train_rmse']} (alone " \
            f"{ref_sgd.report['train_rmse']})"
    check("default group: SGD, the ranks agree", sgd_in_group)

    def complete_in_group():
        X, Y, rep = mfact.complete(R, rank=8, max_iterations=50, ctx=g)
        return agree_across_ranks([X, Y])
    check("default group: complete(), the ranks agree", complete_in_group)

    def device_arrays():
        Rt = torch.sparse_csr_tensor(torch.as_tensor(R.indptr.astype(np.int64)),
                                     torch.as_tensor(R.indices.astype(np.int64)),
                                     torch.as_tensor(R.data), size=R.shape,
                                     device=f"cuda:{local}", check_invariants=True)
        m = mfact.ALS(ctx=g, **als_kw).fit(Rt)
        on_device = isinstance(m.user_factors, torch.Tensor) and m.user_factors.is_cuda
        ok, detail = same(m, mfact.ALS(ctx=alone, **als_kw).fit(Rt))
        return ok and on_device, detail or f"factors on the device: {on_device}"
    check("default group: ALS of a PyTorch CUDA tensor equals its fit alone", device_arrays)

    # The refusals, each on every rank at once (no rank left waiting).
    check("a second join is refused",
          lambda: refused(mfact.InvalidArgument, lambda: g.join("torch")))
    check("a CPU context with a torch.distributed group is refused",
          lambda: refused(mfact.Unsupported,
                          lambda: mfact.Context(backend="cpu", seed=SEED).join("torch")))
    # Contexts on one device in every process (the default device is 0 without a group):
    # every rank refuses before NCCL, which would hang or fail on a shared device.
    shared = mfact.Context(backend="cuda", device=0, seed=SEED)
    check("ranks on one device are refused on every rank",
          lambda: refused(mfact.InvalidArgument, lambda: shared.join("torch")))
    check("... and stay alone", lambda: (shared.world_size == 1, ""))
    shared.close()
    fresh = mfact.Context(backend="cuda", device=local, seed=SEED)
    check("one rank's wrong rank fails every rank's join",
          lambda: refused(mfact.InvalidArgument, lambda: fresh.join("torch", rank=0)))
    check("... and leaves the context alone", lambda: (fresh.world_size == 1, ""))
    check("... which then joins", lambda: (fresh.join("torch").world_size == size, ""))
    check("... and fits", lambda: same(mfact.ALS(ctx=fresh, **als_kw).fit(R), ref))
    fresh.close()
    g.close()

    # 2. A group of dist.new_group.
    sub = dist.new_group(list(range(size)))
    with mfact.Context(backend="cuda", seed=SEED, process_group=sub) as c:
        check("new_group: ALS equals the fit alone",
              lambda: same(mfact.ALS(ctx=c, **als_kw).fit(R), ref))

    # 3. The launcher's environment: rank 0's NCCL id through a rendezvous file.
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "none")
    path = f"/tmp/mfact-fit-two-processes.{os.getuid()}.{run_id}"
    with mfact.Context(backend="cuda", seed=SEED, process_group="launch",
                       rendezvous=path, timeout=120) as c:
        check("launcher: rank and world size",
              lambda: ((c.rank, c.world_size) == (rank, size), f"{(c.rank, c.world_size)}"))
        check("launcher: ALS equals the fit alone",
              lambda: same(mfact.ALS(ctx=c, **als_kw).fit(R), ref))
    dist.barrier()
    check("launcher: the rendezvous file is gone", lambda: (not os.path.exists(path), path))

    # 4. The caller's own hand-over of rank 0's NCCL id.
    with mfact.Context(backend="cuda", device=local, seed=SEED) as c:
        box = [c.make_nccl_id() if rank == 0 else None]
        dist.broadcast_object_list(box, src=0)
        check("NCCL id: the id has MF_NCCL_ID_BYTES", lambda: (len(box[0]) == 128, ""))
        c.join(nccl_id=box[0], rank=rank, world_size=size)
        check("NCCL id: ALS equals the fit alone",
              lambda: same(mfact.ALS(ctx=c, **als_kw).fit(R), ref))
    alone.close()

    failed = [None] * size
    dist.all_gather_object(failed, check.failed)
    bad = sum(len(f) for f in failed)
    if rank == 0:
        if bad:
            print(f"FAIL {bad} of {check.count * size} checks over {size} ranks: "
                  f"{failed}", flush=True)
        else:
            print(f"PASS all {check.count} checks on each of {size} ranks", flush=True)
    dist.destroy_process_group()
    return 1 if bad else 0


if __name__ == "__main__":
    try:
        status = main()
    except Exception as e:  # torchrun then stops the other rank, wherever it waits
        print(f"FAIL rank {os.environ.get('RANK')}: {type(e).__name__}: {e}", flush=True)
        raise
    sys.exit(status)
