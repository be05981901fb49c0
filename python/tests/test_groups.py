"""Groups of processes (mfact.Context.join, docs/python.md "One fit across processes"): the
arguments and every refusal on a CPU context, in this process (no MPI, no PyTorch needed;
launchers faked through their environment variables); with mpi4py, the joins of a one-process
MPI world in a child process; with mpi4py and mpiexec, a fit over two processes whose ranks
both return the one-process model, bit for bit (ALS and ImplicitALS); with PyTorch, two
processes under torchrun over gloo, whose CPU contexts are refused on both ranks at once. A
GPU fit over torch.distributed is python/tests/gpu/fit_two_processes.py, run by hand under
torchrun."""
import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp

import mfact
from conftest import random_ratings

LAUNCHER_VARIABLES = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK",
                      "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK",
                      "PMI_SIZE", "MPI_LOCALRANKID", "SLURM_PROCID", "SLURM_STEP_NUM_TASKS",
                      "SLURM_LOCALID"]


@pytest.fixture
def alone(monkeypatch):
    """No launcher in this process's environment."""
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def torchrun(monkeypatch, rank, size, local=None):
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", str(size))
    monkeypatch.setenv("LOCAL_RANK", str(rank if local is None else local))


def test_a_context_alone_is_rank_0_of_1(ctx):
    assert (ctx.rank, ctx.world_size) == (0, 1)
    assert ctx.group_stats() == {"wait_seconds": 0.0, "exchange_seconds": 0.0,
                                 "exchange_bytes": 0, "calls": 0}
    assert "rank" not in repr(ctx)


def test_launch_info(alone):
    assert mfact.launch_info() == mfact.Launch(0, 1, 0)
    torchrun(alone, 1, 4, local=3)
    assert mfact.launch_info() == (1, 4, 3)
    alone.setenv("WORLD_SIZE", "four")
    with pytest.raises(mfact.InvalidArgument, match="WORLD_SIZE='four'"):
        mfact.launch_info()
    alone.setenv("WORLD_SIZE", "1")
    with pytest.raises(mfact.InvalidArgument, match="RANK=1 is outside 0..0"):
        mfact.launch_info()


def test_join_without_a_launcher_leaves_the_context_alone(ctx, alone):
    assert ctx.join() is ctx
    assert (ctx.rank, ctx.world_size) == (0, 1)
    ctx.join(rank=0, world_size=1)  # nothing to join, so nothing joined: again is fine
    with pytest.raises(mfact.InvalidArgument,
                       match=r"rank 0 of 1 \(started by no launcher\), not rank \? of 2"):
        ctx.join(world_size=2)
    with pytest.raises(mfact.InvalidArgument, match="not rank 1 of"):
        ctx.join(rank=1)


def test_rank_and_world_size_checked_before_anything(ctx, alone):
    for kw, match in ((dict(rank=-1), "rank = -1 is negative"),
                      (dict(world_size=0), "world_size = 0 is not a count"),
                      (dict(rank=2, world_size=2), "rank 2 of 2 is outside 0..1"),
                      (dict(rank=5, world_size=3, nccl_id=bytes(128)), "outside 0..2")):
        with pytest.raises(mfact.InvalidArgument, match=match):
            ctx.join(**kw)
    with pytest.raises(TypeError, match="rank must be an integer"):
        ctx.join(rank=0.5)
    with pytest.raises(TypeError, match="world_size must be an integer"):
        ctx.join(world_size="2")
    assert isinstance(mfact.InvalidArgument("x"), ValueError)  # caught as ValueError too
    assert (ctx.rank, ctx.world_size) == (0, 1)


def test_cpu_contexts_under_torchrun_refused(ctx, alone):
    """torchrun starts no MPI, and CPU contexts join through MPI alone: refused at once
    (no rank waits for another)."""
    torchrun(alone, 1, 2)
    with pytest.raises(mfact.Unsupported, match="torchrun starts no MPI"):
        ctx.join()
    with pytest.raises(mfact.InvalidArgument,
                       match=r"rank 1 of 2 \(the launcher's\), not rank 0 of"):
        ctx.join(rank=0)
    with pytest.raises(mfact.Unsupported, match="torchrun starts no MPI"):
        mfact.Context(backend="cpu", process_group="launch")
    assert (ctx.rank, ctx.world_size) == (0, 1)


def test_without_mpi4py(ctx, alone):
    """MPI's ways in need mpi4py: said as such (as if it were not installed)."""
    alone.setitem(sys.modules, "mpi4py", None)
    with pytest.raises(ImportError, match=r"process_group=\"mpi\" needs mpi4py"):
        ctx.join("mpi")
    alone.setenv("OMPI_COMM_WORLD_RANK", "0")  # as mpirun -n 2 starts rank 0
    alone.setenv("OMPI_COMM_WORLD_SIZE", "2")
    with pytest.raises(mfact.Unsupported, match="through mpi4py, which is not installed"):
        ctx.join()
    assert ctx.world_size == 1


def test_nccl_ids_are_for_cuda_contexts(ctx):
    with pytest.raises(mfact.Unsupported, match="a CPU context makes no NCCL id"):
        ctx.make_nccl_id()
    with pytest.raises(mfact.Unsupported, match="an NCCL id joins CUDA contexts"):
        ctx.join(nccl_id=bytes(128), rank=0, world_size=2)
    with pytest.raises(mfact.InvalidArgument, match="nccl_id needs rank and world_size"):
        ctx.join(nccl_id=bytes(128), rank=0)
    with pytest.raises(TypeError, match="nccl_id must be bytes"):
        ctx.join(nccl_id="an id", rank=0, world_size=2)
    with pytest.raises(ValueError, match="nccl_id is a hand-over of its own"):
        ctx.join("torch", nccl_id=bytes(128), rank=0, world_size=2)


def test_a_cpu_context_with_torch_distributed_refused(ctx, tmp_path):
    """With PyTorch: a one-process gloo group, its default and itself; without: the same
    refusal before PyTorch is looked for."""
    try:
        import torch.distributed as dist
    except ImportError:
        for group in ("torch", True):
            with pytest.raises(mfact.Unsupported, match="joins CUDA contexts"):
                ctx.join(group)
        return
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    try:
        for group in ("torch", True, dist.new_group([0])):
            with pytest.raises(mfact.Unsupported, match="joins CUDA contexts"):
                ctx.join(group)
        with pytest.raises(mfact.InvalidArgument,
                           match=r"rank 0 of 1 \(the process group's\), not rank \? of 3"):
            ctx.join("torch", world_size=3)
    finally:
        dist.destroy_process_group()
    assert (ctx.rank, ctx.world_size) == (0, 1)


def test_join_arguments_that_do_not_go_together(ctx):
    with pytest.raises(TypeError, match="process_group must be"):
        ctx.join(object())
    with pytest.raises(TypeError, match="process_group must be"):
        ctx.join("gloo")
    with pytest.raises(ValueError, match="rendezvous and timeout go with"):
        ctx.join("torch", rendezvous="/tmp/x")
    with pytest.raises(mfact.InvalidArgument, match="timeout = -1"):
        ctx.join(timeout=-1)
    with pytest.raises(ValueError, match="rendezvous and timeout go with process_group"):
        mfact.Context(backend="cpu", timeout=10)


def test_the_default_device_is_the_local_rank_in_a_group(alone):
    """device=None: 0 alone; with process_group, the launcher's local rank (seen where the
    join refuses: the context was made on it)."""
    assert mfact.Context(backend="cpu").device == 0
    torchrun(alone, 1, 2, local=1)
    assert mfact.Context(backend="cpu").device == 0  # no group asked for
    made = []
    real_join = mfact.Context.join

    def spy(self, *a, **kw):
        made.append(self.device)
        return real_join(self, *a, **kw)

    alone.setattr(mfact.Context, "join", spy)
    with pytest.raises(mfact.Unsupported):
        mfact.Context(backend="cpu", process_group="launch")
    assert made == [1]


# ---- MPI: mpi4py in child processes ----------------------------------------------------------
def mpi4py_or_skip():
    if importlib.util.find_spec("mpi4py") is None:  # MPI stays out of this process
        pytest.skip("mpi4py is not installed (pip install mpi4py; Open MPI: libopenmpi-dev)")


SCRIPT_HELPERS = """
    def refused(cls, fn):
        \"\"\"The message of fn's refusal, which must be a cls.\"\"\"
        try:
            fn()
        except cls as e:
            return str(e)
        raise AssertionError(f"{fn} was not refused with {cls.__name__}")
"""


def write_script(tmp_path, body):
    """A child process's script: SCRIPT_HELPERS, then body."""
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(SCRIPT_HELPERS) + textwrap.dedent(body))
    return path


def test_mpi_world_of_one_process(tmp_path):
    """process_group="mpi" in a one-process world (no mpiexec): rank 0 of 1, a fit that is
    the context's alone bit for bit, and the refusals: a second join, a rank the world does
    not give, a null communicator."""
    mpi4py_or_skip()
    path = write_script(tmp_path, """
        import numpy as np, scipy.sparse as sp, mfact
        from mpi4py import MPI
        R = sp.load_npz("ratings.npz")
        with mfact.Context(backend="cpu", threads=1, seed=3) as one, \\
                mfact.Context(backend="cpu", threads=1, seed=3, process_group="mpi") as ctx:
            assert (ctx.rank, ctx.world_size) == (0, 1), (ctx.rank, ctx.world_size)
            assert "rank 0 of 1" in repr(ctx)
            a = mfact.ALS(rank=6, iterations=3, ctx=one).fit(R)
            b = mfact.ALS(rank=6, iterations=3, ctx=ctx).fit(R)
            assert np.array_equal(a.user_factors, b.user_factors)
            assert np.array_equal(a.item_factors, b.item_factors)
            print(refused(mfact.InvalidArgument, lambda: ctx.join("mpi")))
            print(refused(mfact.InvalidArgument, lambda: ctx.join(MPI.COMM_WORLD)))
            with mfact.Context(backend="cpu") as other:
                print(refused(mfact.InvalidArgument,
                              lambda: other.join(MPI.COMM_WORLD, rank=1, world_size=2)))
                print(refused(mfact.InvalidArgument, lambda: other.join(MPI.COMM_NULL)))
                assert other.world_size == 1
                other.join(MPI.COMM_SELF.Dup(), rank=0)
                assert other.world_size == 1 and "rank 0 of 1" in repr(other)
        print("done")
    """)
    sp.save_npz(tmp_path / "ratings.npz", random_ratings(60, 40, 0.2, 5))
    env = dict(os.environ)
    for name in LAUNCHER_VARIABLES:
        env.pop(name, None)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path, env=env)
    text = out.stdout + out.stderr
    if "this build of mfact has no MPI" in text:
        pytest.skip("the loaded libmfact was built without MPI (MFACT_MPI)")
    assert out.returncode == 0, text
    lines = out.stdout.splitlines()
    assert "already in a group (joined through an MPI communicator)" in lines[0]
    assert "already in a group" in lines[1]
    assert "rank 0 of 1 (the communicator's), not rank 1 of 2" in lines[2]
    assert "intracommunicator" in lines[3]
    assert lines[-1] == "done"


def planted_ratings(users, items, density, seed, k=4):
    """Ratings 1..5 of a planted rank-k model plus noise (factors worth comparing, unlike
    those of pure noise, which regularization keeps near zero)."""
    rng = np.random.default_rng(seed)
    U, V = rng.standard_normal((users, k)), rng.standard_normal((items, k))
    M = sp.random(users, items, density, format="coo", random_state=rng)
    values = np.clip(3 + (U[M.row] * V[M.col]).sum(1) + 0.1 * rng.standard_normal(M.nnz),
                     1, 5)  # ratings, and play counts for ImplicitALS (>= 0)
    return sp.csr_matrix((values.astype(np.float32), (M.row, M.col)), shape=M.shape)


def mpiexec_or_skip():
    mpi4py_or_skip()
    mpiexec = shutil.which("mpiexec") or shutil.which("mpirun")
    if not mpiexec:
        pytest.skip("no mpiexec on PATH (Open MPI: openmpi-bin)")
    version = subprocess.run([mpiexec, "--version"], capture_output=True, text=True).stdout
    # As tests/CMakeLists.txt runs the C suites: as root, on any count of cores.
    flags = ["--oversubscribe"] if "Open MPI" in version or "OpenRTE" in version else []
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    return [mpiexec, "-n", "2"] + flags, env


RANKS_SCRIPT = """
    import sys
    import numpy as np, scipy.sparse as sp, mfact
    from mpi4py import MPI
    R = sp.load_npz("ratings.npz")
    me = MPI.COMM_WORLD.Get_rank()
    log = open(f"rank{me}.txt", "w")  # a file per rank: printed lines of two ranks interleave
    # The launcher's world through mpi4py (process_group="launch" on a CPU context).
    with mfact.Context(backend="cpu", threads=1, seed=3, process_group="launch") as ctx:
        assert (ctx.rank, ctx.world_size) == (me, 2), (ctx.rank, ctx.world_size)
        als = mfact.ALS(rank=8, iterations=6, lambda_=0.01, ctx=ctx).fit(R)
        ials = mfact.ImplicitALS(rank=8, iterations=3, ctx=ctx).fit(R)
        # Input split over the ranks: each reads every other line of the file.
        P = mfact.read("ratings.txt", part=(me, 2), ctx=ctx)
        assert P.part == (me, 2) and P.shape == R.shape and P.nnz < R.nnz, (P.part, P.shape)
        split = mfact.ALS(rank=8, iterations=6, lambda_=0.01, ctx=ctx).fit(P)
        # One rank's refusal fails both ranks' joins, no rank left waiting: rank 1 is told
        # its rank is 0, rank 0 that rank 1 failed.
        with mfact.Context(backend="cpu", seed=3) as other:
            try:
                other.join("mpi", rank=0)
            except mfact.InvalidArgument as e:
                print(f"rank {me} refused: {e}", file=log)
            assert other.world_size == 1
        try:
            ctx.join(MPI.COMM_WORLD)
        except mfact.InvalidArgument as e:
            print(f"rank {me} again: {e}", file=log)
    np.savez(f"rank{me}.npz", U=als.user_factors, V=als.item_factors, bu=als.user_biases,
             bi=als.item_biases, mean=als.mean, iU=ials.user_factors, iV=ials.item_factors,
             sU=split.user_factors, sV=split.item_factors)
    print(f"rank {me} done", file=log)
"""


def ranks_output(tmp_path, out):
    """The two ranks' log files, one after the other, and what the launcher printed."""
    logs = [(tmp_path / f"rank{r}.txt") for r in (0, 1)]
    return "".join(p.read_text() for p in logs if p.exists()) + out.stdout + out.stderr


def test_two_mpi_ranks_fit_the_one_process_model(tmp_path):
    """mpiexec -n 2: both ranks return the model one process fits, bit for bit (ALS and
    ImplicitALS over a group are one context's: each rank solves a share of the rows and the
    ranks exchange them whole)."""
    cmd, env = mpiexec_or_skip()
    for name in LAUNCHER_VARIABLES:
        env.pop(name, None)
    R = planted_ratings(300, 200, 0.08, seed=7)
    sp.save_npz(tmp_path / "ratings.npz", R)
    coo = R.tocoo()
    (tmp_path / "ratings.txt").write_text("".join(
        f"{r} {c} {v!r}\n" for r, c, v in zip(coo.row, coo.col, coo.data.tolist())))
    path = write_script(tmp_path, RANKS_SCRIPT)
    out = subprocess.run(cmd + [sys.executable, str(path)], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path, env=env)
    text = ranks_output(tmp_path, out)
    if "this build of mfact has no MPI" in text:
        pytest.skip("the loaded libmfact was built without MPI (MFACT_MPI)")
    assert out.returncode == 0, text
    assert "rank 1 refused: mfact.Context.join: this process is rank 1 of 2 (the " \
        "communicator's), not rank 0 of ?" in text, text
    assert "rank 0 refused: mfact.Context.join: rank 1 of 2 failed:" in text, text
    assert text.count("already in a group") == 2, text
    with mfact.Context(backend="cpu", threads=1, seed=3) as one:
        als = mfact.ALS(rank=8, iterations=6, lambda_=0.01, ctx=one).fit(R)
        ials = mfact.ImplicitALS(rank=8, iterations=3, ctx=one).fit(R)
    assert als.report["train_rmse"] < 0.5  # a model, not noise shrunk to zero
    for r in (0, 1):
        got = np.load(tmp_path / f"rank{r}.npz")
        for key, want in (("U", als.user_factors), ("V", als.item_factors),
                          ("bu", als.user_biases), ("bi", als.item_biases),
                          ("iU", ials.user_factors), ("iV", ials.item_factors)):
            assert np.array_equal(got[key], want), f"rank {r}: {key}"
        assert float(got["mean"]) == als.mean
    # The split fit: the whole file's model, to rounding (its mean is a sum over the ranks).
    with mfact.Context(backend="cpu", threads=1, seed=3) as one:
        whole = mfact.ALS(rank=8, iterations=6, lambda_=0.01, ctx=one).fit(
            mfact.read(str(tmp_path / "ratings.txt"), ctx=one))
    for r in (0, 1):
        got = np.load(tmp_path / f"rank{r}.npz")
        for key, want in (("sU", whole.user_factors), ("sV", whole.item_factors)):
            assert np.abs(got[key] - want).max() <= 1e-4 * np.abs(want).max(), f"rank {r}: {key}"


# ---- torch.distributed: two CPU processes over gloo ------------------------------------------
TORCH_SCRIPT = """
    import os
    import torch.distributed as dist, mfact
    dist.init_process_group("gloo")
    me = dist.get_rank()
    log = open(f"rank{me}.txt", "w")
    def say(*words):
        print(*words, file=log, flush=True)
    assert mfact.launch_info() == (me, 2, me)
    ctx = mfact.Context(backend="cpu", seed=3)
    say(f"rank {me} cpu:", refused(mfact.Unsupported, lambda: ctx.join("torch")))
    say(f"rank {me} launch:", refused(mfact.Unsupported, lambda: ctx.join()))
    # Rank 0 stands in for a CUDA context (no GPU here): only rank 1 refuses, and rank 0's
    # join fails with rank 1's refusal instead of waiting for it.
    if me == 0:
        ctx._need_cuda = lambda how: None
        ctx.make_nccl_id = lambda: bytes(128)
    say(f"rank {me} one:", refused(mfact.Unsupported,
                                   lambda: ctx.join(dist.new_group([0, 1]))))
    assert ctx.world_size == 1
    made = mfact.Context(backend="cpu", process_group=None)
    assert made.device == 0
    dist.destroy_process_group()
    say(f"rank {me} done")
"""


def test_torch_distributed_two_cpu_processes(tmp_path):
    """torchrun, two processes, gloo: the refusals of CPU contexts arrive on both ranks
    through one collective (a rank whose own checks passed raises the other's refusal)."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("PyTorch is not installed")
    path = write_script(tmp_path, TORCH_SCRIPT)
    env = dict(os.environ)
    for name in LAUNCHER_VARIABLES:
        env.pop(name, None)
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                          "--nproc_per_node", "2", str(path)], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path, env=env)
    text = ranks_output(tmp_path, out)
    assert out.returncode == 0, text
    for r in (0, 1):
        assert f"rank {r} cpu: mfact.Context.join: a torch.distributed group joins CUDA " \
            "contexts" in text, text
        assert f"rank {r} launch: mfact.Context.join: a CPU context joins its processes " \
            "through MPI, and torchrun starts no MPI" in text, text
        assert f"rank {r} done" in text, text
    assert "rank 1 one: mfact.Context.join: a torch.distributed group joins CUDA" in text
    assert "rank 0 one: mfact.Context.join: rank 1 of 2 failed: a torch.distributed group " \
        "joins CUDA contexts" in text, text
