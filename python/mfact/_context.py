"""mfact.Context: one mf_ctx (a backend, a device, a memory limit, a seed), alone or a rank
of a group of processes (Context.join: torch.distributed, mpi4py, a launcher's environment,
or the caller's own hand-over of an NCCL id)."""
import collections
import ctypes
import logging
import math
import operator
import os
import socket
import threading
import weakref

from . import _lib
from ._errors import _BY_STATUS, Error, InvalidArgument, Unsupported, check
from ._ints import INT32, SIZE, UINT64, to_c
from ._text import c_path

Launch = collections.namedtuple("Launch", "rank world_size local_rank")


def launch_info():
    """What the launcher that started this process says (mf_launch_detect): Launch(rank,
    world_size, local_rank) from torchrun's, Open MPI's, MPICH's or srun's variables, tried in
    that order; Launch(0, 1, 0) when no launcher started it. A malformed variable is
    mfact.InvalidArgument naming it."""
    fn = _experimental("mf_launch_detect")
    rank, size, local = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    check(fn(ctypes.byref(rank), ctypes.byref(size), ctypes.byref(local)), None,
          "mfact.launch_info")
    return Launch(rank.value, size.value, local.value)


# The library's log levels (mf_log_level) and the logging module's for them.
_LOG_LEVELS = {"error": 1, "warning": 2, "info": 3, "debug": 4}
_LOGGING_LEVEL = {1: logging.ERROR, 2: logging.WARNING, 3: logging.INFO, 4: logging.DEBUG}
_LOG_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)


@_LOG_FN
def _log_to_logging(_user, level, message):
    """The library's messages to the logger "mfact" (called on the thread that called into
    the library, which ctypes gives the GIL). One function for every context: it lives as
    long as the module, so no context can outlive its callback."""
    try:
        logging.getLogger("mfact").log(_LOGGING_LEVEL.get(level, logging.INFO),
                                       message.decode("utf-8", "replace"))
    except Exception:  # at interpreter shutdown the module's globals may be gone already
        pass


def _experimental(name):
    fn = getattr(_lib, name)
    if fn is None:
        raise Unsupported(f"mfact: the loaded libmfact ({_lib.library_path}) has no {name} "
                          "(groups of processes need a newer library)")
    return fn


def _default_rendezvous():
    """The rendezvous of ranks on one host, as the mfact tool makes it: a file in a
    directory of this user's alone under /tmp (a fixed path in /tmp itself could be a
    file or FIFO another user planted)."""
    import stat

    directory = f"/tmp/mfact-{os.geteuid()}"
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(directory)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise InvalidArgument(
            f"{directory} is not a directory of this user's alone: set MFACT_RENDEZVOUS")
    return os.path.join(directory, "rendezvous")


class CallLock:
    """A context's lock: one call at a time, reentrant for the thread inside a call (a
    progress callback may call back in), and counting how deep that thread is, so that a
    matrix closed while a call may still read it (from the call's own callback, or from
    another thread) is destroyed when the outermost call ends, not under it."""

    def __init__(self):
        self._lock = threading.RLock()
        self._depth = 0           # the holder's nesting; touched only by the holder
        self._pending = []        # mf_sparse handles to destroy when the outermost call ends
        self._pending_lock = threading.Lock()

    def acquire(self, blocking=True):
        if not self._lock.acquire(blocking):
            return False
        self._depth += 1
        return True

    def release(self):
        try:
            if self._depth == 1:
                self.drain()
        finally:
            self._depth -= 1
            self._lock.release()

    __enter__ = acquire

    def __exit__(self, *exc):
        self.release()

    @property
    def in_call(self):
        """Whether the holder (the calling thread, which must hold it) is inside an outer
        call: its own `with` is one level, a call around it another. (Context.close asks.)"""
        return self._depth > 1

    def claim(self, owner):
        """owner._handle, taken once (None for every later caller, on any thread)."""
        with self._pending_lock:
            handle, owner._handle = owner._handle, None
            return handle

    def defer(self, handle):
        with self._pending_lock:
            self._pending.append(handle)

    def drain(self):
        """Destroy the deferred handles (the caller holds the lock, outside any call)."""
        with self._pending_lock:
            handles, self._pending = self._pending, []
        for h in handles:
            _lib.mf_sparse_destroy(h)


class Context:
    """A library context. Every call takes one (`ctx=`); without it, the default context
    (backend "auto": CUDA when a device is usable, else the CPU; seed 0) is used.

    >>> with mfact.Context(backend="cpu", threads=2, seed=7) as ctx:
    ...     model = mfact.ALS(rank=32, ctx=ctx).fit(ratings)

    One fit across processes (one per GPU, or CPU ranks under mpirun): every process makes
    its context with the same seed and joins the group, then calls the same fit on the same
    data, and every rank gets the whole model:

    >>> ctx = mfact.Context(backend="cuda", process_group="torch")  # after init_process_group
    >>> model = mfact.ALS(rank=64, ctx=ctx).fit(ratings)            # on every rank

    `process_group` joins at once (see `join`); `device` then defaults to the launcher's local
    rank (LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK, ...), else to 0. `rendezvous` and `timeout`
    go to `join`.

    `log_level` ("error", "warning", "info" or "debug"; None: none) sends the library's
    messages from that level up to the `logging` logger "mfact": "info" says where an ALS
    fit's time goes, phase by phase, and which plan an SDDMM chose.
    """

    def __init__(self, backend="auto", device=None, memory_limit=0, threads=0, seed=0,
                 process_group=None, rendezvous=None, timeout=None, log_level=None):
        if backend not in _lib.BACKENDS:
            raise ValueError(f"backend must be one of {sorted(_lib.BACKENDS)}, not {backend!r}")
        if log_level is not None and log_level not in _LOG_LEVELS:
            raise ValueError(f"mfact.Context: log_level must be None or one of "
                             f"{list(_LOG_LEVELS)}, not {log_level!r}")
        if process_group is None and (rendezvous is not None or timeout is not None):
            raise ValueError("mfact.Context: rendezvous and timeout go with process_group")
        if device is None:
            device = launch_info().local_rank if process_group is not None else 0
        opts = _lib.CtxOpts()
        _lib.mf_ctx_opts_init(ctypes.byref(opts))
        opts.backend = _lib.BACKENDS[backend]
        device = to_c(device, "mfact.Context: device", INT32)
        seed = to_c(seed, "mfact.Context: seed", UINT64)
        opts.device = device
        opts.device_memory_limit = to_c(memory_limit, "mfact.Context: memory_limit", SIZE)
        opts.cpu_threads = to_c(threads, "mfact.Context: threads", INT32)
        opts.seed = seed
        if log_level is not None:
            opts.log = ctypes.cast(_log_to_logging, ctypes.c_void_p).value
            opts.log_level = _LOG_LEVELS[log_level]
        handle = ctypes.c_void_p()
        status = _lib.mf_ctx_create(ctypes.byref(handle), ctypes.byref(opts))
        # The failure's message is on the context when one was made, else in the status.
        check(status, handle.value, "mfact.Context")
        self._handle = handle.value
        self.seed = seed
        # One call at a time (the library allows one thread per context, and its last error
        # must be read by the thread whose call failed); matrices die before the context.
        self.lock = CallLock()
        self._matrices = weakref.WeakSet()
        self.device = device  # meaningful on a CUDA context
        self._group = None  # how it joined its group (said in refusals); None: alone
        if process_group is not None:
            try:
                self.join(process_group, rendezvous=rendezvous, timeout=timeout)
            except BaseException:
                self.close()
                raise

    @property
    def handle(self):
        if self._handle is None:
            raise ValueError("mfact.Context: the context is closed")
        return self._handle

    @property
    def backend(self):
        """"cpu" or "cuda": what "auto" resolved to."""
        return _lib.BACKEND_NAMES[_lib.mf_ctx_backend(self.handle)]

    @property
    def rank(self):
        """This context's rank in its group: 0 outside a group (mf_ctx_rank)."""
        return self._place()[0]

    @property
    def world_size(self):
        """The size of this context's group: 1 outside a group (mf_ctx_rank)."""
        return self._place()[1]

    def group_stats(self):
        """What this rank's part in its group's collectives has cost since it joined
        (mf_ctx_group_stats): a dict of wait_seconds (agreements, waiting for the slowest
        rank included), exchange_seconds (moving factors and entries between ranks),
        exchange_bytes (received) and calls. Zeros outside a group."""
        if _lib.mf_ctx_group_stats is None:  # a library from before the stats
            raise NotImplementedError("this libmfact has no mf_ctx_group_stats")
        s = _lib.GroupStats(struct_size=ctypes.sizeof(_lib.GroupStats))
        check(_lib.mf_ctx_group_stats(self.handle, ctypes.byref(s)), self.handle,
              "mfact.Context.group_stats")
        return {"wait_seconds": s.wait_seconds, "exchange_seconds": s.exchange_seconds,
                "exchange_bytes": s.exchange_bytes, "calls": s.calls}

    def _place(self):
        if _lib.mf_ctx_rank is None:  # a library from before groups: always alone
            return 0, 1
        rank, size = ctypes.c_int(), ctypes.c_int()
        check(_lib.mf_ctx_rank(self.handle, ctypes.byref(rank), ctypes.byref(size)),
              self.handle, "mfact.Context.rank")
        return rank.value, size.value

    def join(self, process_group="launch", *, rank=None, world_size=None, nccl_id=None,
             rendezvous=None, timeout=None):
        """Make this context a rank of a group of processes, so that a collective fit
        (ALS, ImplicitALS, SGD, complete) runs across them: every rank then calls the same
        fit with the same data, options and seed, and gets the whole model. Returns the
        context. Every process of the group calls join at the same point.

        process_group:
          "launch" (the default): the processes a launcher started (torchrun, mpirun,
            srun; `launch_info`). A CUDA context meets the others through NCCL, rank 0
            handing its id over in the file `rendezvous` (default: MFACT_RENDEZVOUS, else
            /tmp/mfact-<uid>/rendezvous, a directory of the user's alone, as the mfact tool
            uses; across hosts, a path every host sees), waited for
            up to `timeout` seconds (default 300). A CPU context joins MPI's world through
            mpi4py (under mpirun or srun). Started by no launcher: nothing to join, the
            context stays alone.
          "torch" or True: torch.distributed's default group; or a ProcessGroup of
            torch.distributed (dist.new_group(...)). CUDA contexts: rank 0's NCCL id goes
            to the group's other ranks through torch.distributed; rank and size are the
            group's.
          "mpi": mpi4py's MPI.COMM_WORLD; or an mpi4py communicator (an Intracomm). CPU
            contexts: the library exchanges over its own duplicate of it.
        nccl_id: the caller's own hand-over instead (CUDA contexts): the bytes rank 0's
          `make_nccl_id` returned, carried to every rank by the caller; `rank` and
          `world_size` are then required.
        rank, world_size: with a group, what this process expects to be; a group or
          launcher that says otherwise is mfact.InvalidArgument.

        Errors are raised before any rank waits where they can be: a context already in a
        group, rank or world_size outside their ranges (InvalidArgument), a CPU context with
        torch.distributed or an NCCL id, a CUDA context with MPI (Unsupported). With
        torch.distributed and mpi4py a failure on one rank fails every rank's join.
        """
        rank, world_size = _place_args(rank, world_size)
        launched = _is_str(process_group, "launch")
        if nccl_id is not None and not launched:
            raise ValueError("mfact.Context.join: nccl_id is a hand-over of its own: give "
                             "it without process_group")
        if (rendezvous is not None or timeout is not None) and \
                (not launched or nccl_id is not None):
            raise ValueError("mfact.Context.join: rendezvous and timeout go with the "
                             "launcher's processes (process_group=\"launch\")")
        with self.lock:
            if nccl_id is not None:
                self._join_nccl_id(nccl_id, rank, world_size)
            elif launched:
                self._join_launched(rank, world_size, rendezvous, timeout)
            elif _is_str(process_group, "mpi") or _is_mpi_comm(process_group):
                self._join_mpi(process_group, rank, world_size)
            elif process_group is True or _is_str(process_group, "torch") or \
                    _is_torch_group(process_group):
                self._join_torch(process_group, rank, world_size)
            else:
                raise TypeError("mfact.Context.join: process_group must be \"launch\", "
                                "\"torch\" (or True), a torch.distributed ProcessGroup, "
                                f"\"mpi\" or an mpi4py communicator, not {process_group!r}")
        return self

    def make_nccl_id(self):
        """Rank 0's part of the caller's own hand-over (CUDA contexts): a new NCCL id, as
        bytes (MF_NCCL_ID_BYTES of them), for every rank's join(nccl_id=..., rank=...,
        world_size=...)."""
        fn = _experimental("mf_nccl_make_id")
        buf = ctypes.create_string_buffer(_lib.NCCL_ID_BYTES)
        with self.lock:
            check(fn(self.handle, buf, _lib.NCCL_ID_BYTES), self.handle,
                  "mfact.Context.make_nccl_id")
        return buf.raw

    # ---- the ways in ---------------------------------------------------------------------
    def _refuse_second_join(self, how):
        """Already in a group: the library refuses too; saying it here, before any rank
        waits for another, keeps one rank's mistake from leaving the others waiting."""
        if self._group is not None:
            raise InvalidArgument(f"mfact.Context.join: the context is already in a group "
                                  f"(joined through {self._group}); make a new context to "
                                  f"join {how}")

    def _need_cuda(self, how):
        if self.backend != "cuda":
            raise Unsupported(f"mfact.Context.join: {how} joins CUDA contexts (NCCL); a CPU "
                              "context joins its processes through MPI (process_group="
                              "\"mpi\" or an mpi4py communicator, under mpirun)")

    def _join_nccl_id(self, nccl_id, rank, world_size):
        if rank is None or world_size is None:
            raise InvalidArgument("mfact.Context.join: nccl_id needs rank and world_size")
        try:
            raw = bytes(nccl_id)
        except TypeError:
            raise TypeError("mfact.Context.join: nccl_id must be bytes (make_nccl_id's), not "
                            f"{type(nccl_id).__name__}") from None
        self._refuse_second_join("through an NCCL id")
        self._need_cuda("an NCCL id")
        fn = _experimental("mf_ctx_join_nccl_id")
        buf = ctypes.create_string_buffer(raw, len(raw))
        check(fn(self.handle, buf, len(raw), rank, world_size), self.handle,
              "mfact.Context.join")
        self._group = "an NCCL id"

    def _join_launched(self, rank, world_size, rendezvous, timeout):
        timeout = _timeout(timeout)
        launch = launch_info()
        _expect(rank, world_size, launch.rank, launch.world_size,
                "the launcher's" if launch.world_size > 1 else "started by no launcher")
        if launch.world_size == 1:
            return  # no launcher, or one process: alone, as the library leaves it
        if self.backend != "cuda":  # its checks agree over the world first
            return self._join_mpi(_launched_mpi_world(launch), None, None)
        self._refuse_second_join("the launcher's processes")
        if rendezvous is None:
            rendezvous = os.environ.get("MFACT_RENDEZVOUS") or _default_rendezvous()
        fn = _experimental("mf_ctx_join_launched")
        path = c_path(rendezvous, "mfact.Context.join: rendezvous")
        check(fn(self.handle, path, timeout), self.handle, "mfact.Context.join")
        self._group = "the launcher's processes"

    def _join_mpi(self, comm, rank, world_size):
        try:  # a communicator of mpi4py's came in, or "mpi" asks for its world
            from mpi4py import MPI
        except ImportError:
            raise ImportError("mfact.Context.join: process_group=\"mpi\" needs mpi4py (pip "
                              "install mpi4py)") from None
        if _is_str(comm, "mpi"):
            comm = MPI.COMM_WORLD
        if not isinstance(comm, MPI.Intracomm) or comm == MPI.COMM_NULL:
            raise InvalidArgument("mfact.Context.join: the MPI communicator must be an "
                                  f"intracommunicator (one group of ranks), not {comm!r}")
        me, size = comm.Get_rank(), comm.Get_size()
        # This side's checks agree over the communicator before the library's join (a
        # collective, which agrees on its own checks): one rank's refusal then fails every
        # rank instead of leaving the others waiting inside MPI.
        problem = None
        try:
            _expect(rank, world_size, me, size, "the communicator's")
            self._refuse_second_join("an MPI communicator")
            _experimental("mf_ctx_set_mpi_comm")
        except Error as e:
            problem = e
        _settle(comm.allgather(_report(problem)), problem, me)
        handle = ctypes.c_void_p(MPI._addressof(comm))
        check(_lib.mf_ctx_set_mpi_comm(self.handle, handle), self.handle,
              "mfact.Context.join")
        self._group = "an MPI communicator"

    def _join_torch(self, group, rank, world_size):
        try:
            import torch.distributed as dist
        except ImportError:
            self._need_cuda("a torch.distributed group")
            raise ImportError("mfact.Context.join: process_group=\"torch\" needs PyTorch "
                              "(torch.distributed)") from None
        if not (dist.is_available() and dist.is_initialized()):
            raise InvalidArgument("mfact.Context.join: torch.distributed is not initialized "
                                  "(call torch.distributed.init_process_group first)")
        group = None if group is True or _is_str(group, "torch") else group
        me, size = dist.get_rank(group), dist.get_world_size(group)
        if me < 0:
            raise InvalidArgument("mfact.Context.join: this process is not in process_group")

        def rank0_id():
            _expect(rank, world_size, me, size, "the process group's")
            self._refuse_second_join("a torch.distributed group")
            self._need_cuda("a torch.distributed group")
            _experimental("mf_ctx_join_nccl_id")
            return self.make_nccl_id() if me == 0 else None

        problem, nccl_id = None, None
        try:
            nccl_id = rank0_id()
        except Error as e:  # the library's refusals and this side's, for every rank
            problem = e
        # One collective carries rank 0's id, every rank's verdict and its place (host and
        # device), where broadcast_object_list would carry the id alone and a rank that
        # refused would leave the others waiting in NCCL's join. It goes through the
        # device torch.distributed uses (its current one, as torch asks every rank to set):
        # through the context's device, two ranks whose contexts share one would hang it.
        place = (socket.gethostname(), self.device if self.backend == "cuda" else -1)
        gathered = [None] * size
        dist.all_gather_object(gathered, (_report(problem), nccl_id, place), group=group)
        places = [g[2] for g in gathered]
        reports = [g[0] if g[0] is not None else _report(_shared_device(places, r))
                   for r, g in enumerate(gathered)]
        _settle(reports, problem or _shared_device(places, me), me)
        buf = ctypes.create_string_buffer(gathered[0][1], len(gathered[0][1]))
        check(_lib.mf_ctx_join_nccl_id(self.handle, buf, len(buf.raw), me, size), self.handle,
              "mfact.Context.join")
        self._group = "a torch.distributed group"

    @property
    def last_error(self):
        raw = _lib.mf_ctx_last_error(self.handle)
        return raw.decode("utf-8", "replace") if raw else ""

    def _own(self, matrix):
        self._matrices.add(matrix)

    def close(self):
        """Free the context, and first every mfact.Matrix made on it (they hold device
        memory of its pool; using one afterwards is a ValueError)."""
        if getattr(self, "_handle", None) is not None:
            with self.lock:
                if self.lock.in_call:
                    raise RuntimeError("mfact.Context.close: a call on this context is still "
                                       "running on this thread (close it from a progress "
                                       "callback and the call would use freed memory); "
                                       "close it after the call returns")
                if self._handle is None:  # another thread closed it meanwhile
                    return
                for m in list(self._matrices):
                    m.close()  # deferred by the lock we hold: destroyed just below
                self.lock.drain()
                _lib.mf_ctx_destroy(self._handle)
                self._handle = None

    # A context is the library's handle (a device, its memory pool, a group's
    # communicators): copies share it (sklearn.base.clone deep-copies the parameters, ctx
    # among them), and it cannot be pickled (a model pickles without its context).
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        raise TypeError("mfact.Context cannot be pickled (it holds the library's handle); "
                        "pickle the model, which leaves its context behind")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self):
        if self._handle is None:
            return f"mfact.Context(closed, seed={self.seed})"
        rank, size = self._place()
        group = f", rank {rank} of {size}" if self._group is not None else ""
        return f"mfact.Context({self.backend}, seed={self.seed}{group})"


# ---- join's arguments and agreements -------------------------------------------------------
def _is_str(x, name):
    return isinstance(x, str) and x == name


def _is_mpi_comm(x):
    return type(x).__module__.startswith("mpi4py")


def _is_torch_group(x):
    return type(x).__module__.startswith("torch") and "ProcessGroup" in type(x).__name__


def _place_args(rank, world_size):
    """rank and world_size as ints (None stays None): 1 <= world_size, 0 <= rank <
    world_size."""
    def as_int(x, name):
        if x is None:
            return None
        try:
            return operator.index(x)
        except TypeError:
            raise TypeError(f"mfact.Context.join: {name} must be an integer, not "
                            f"{type(x).__name__}") from None
    rank, world_size = as_int(rank, "rank"), as_int(world_size, "world_size")
    if world_size is not None and not 1 <= world_size <= 2**31 - 1:
        raise InvalidArgument(f"mfact.Context.join: world_size = {world_size} is not a count "
                              "of processes (1 or more)")
    if rank is not None and rank < 0:
        raise InvalidArgument(f"mfact.Context.join: rank = {rank} is negative")
    if rank is not None:  # an int of C (its world_size is checked above)
        to_c(rank, "mfact.Context.join: rank", INT32)
    if rank is not None and world_size is not None and rank >= world_size:
        raise InvalidArgument(f"mfact.Context.join: rank {rank} of {world_size} is outside "
                              f"0..{world_size - 1}")
    return rank, world_size


def _expect(rank, world_size, got_rank, got_size, what):
    """The caller's rank and world_size (None: anything) against the group's."""
    if (rank is not None and rank != got_rank) or \
            (world_size is not None and world_size != got_size):
        want = f"rank {'?' if rank is None else rank} of " \
            f"{'?' if world_size is None else world_size}"
        raise InvalidArgument(f"mfact.Context.join: this process is rank {got_rank} of "
                              f"{got_size} ({what}), not {want}")


def _timeout(timeout):
    if timeout is None:
        return 0.0  # the library's default, 300 s
    try:
        t = float(timeout)
    except (TypeError, ValueError):
        raise TypeError("mfact.Context.join: timeout must be a number of seconds") from None
    if math.isnan(t) or t <= 0:
        raise InvalidArgument(f"mfact.Context.join: timeout = {timeout!r} is not a positive "
                              "number of seconds")
    return t


def _launched_mpi_world(launch):
    """A CPU context under a launcher joins MPI's world: mpi4py's COMM_WORLD, when mpi4py is
    there and its world is the launcher's (mpirun's, srun's; not torchrun's, which starts
    no MPI)."""
    head = "mfact.Context.join: a CPU context joins its processes through MPI"
    if os.environ.get("RANK") is not None and os.environ.get("WORLD_SIZE") is not None:
        raise Unsupported(f"{head}, and torchrun starts no MPI: start them with mpirun "
                          "(mpi4py installed), or use CUDA contexts")
    try:
        from mpi4py import MPI
    except ImportError:
        raise Unsupported(f"{head}, here through mpi4py, which is not installed (pip install "
                          "mpi4py)") from None
    if MPI.COMM_WORLD.Get_size() != launch.world_size:
        raise Unsupported(f"{head}, but MPI's world has {MPI.COMM_WORLD.Get_size()} "
                          f"processes where the launcher started {launch.world_size}: pass "
                          "the communicator (process_group=comm)")
    return MPI.COMM_WORLD


def _report(problem):
    """What a rank tells the others of its checks: None, or (status, message)."""
    return None if problem is None else (problem.status, str(problem))


def _shared_device(places, me):
    """InvalidArgument when this rank's CUDA device on its host is another rank's too
    (NCCL takes one rank per device), else None. Every rank sees the same places, so the
    ranks that share a device all refuse, and _settle fails the others."""
    for r, place in enumerate(places):
        if r != me and place[1] >= 0 and place == places[me]:
            return InvalidArgument(
                f"mfact.Context.join: ranks {min(r, me)} and {max(r, me)} both use CUDA device "
                f"{place[1]} on {place[0]}: give each rank its own device "
                "(mfact.Context(device=mfact.launch_info().local_rank))")
    return None


def _settle(reports, problem, me):
    """Raise on every rank when one refused: its own error on that rank, its status and
    message on the others; nothing when all agreed."""
    if problem is not None:
        raise problem
    for r, rep in enumerate(reports):
        if rep is not None and r != me:
            status, message = rep
            message = message.replace("mfact.Context.join: ", "", 1)
            err = _BY_STATUS.get(status, Error)(
                f"mfact.Context.join: rank {r} of {len(reports)} failed: {message}")
            err.status = status
            raise err


_default = None
_default_lock = threading.Lock()


def default_context():
    """The context calls use when given none: made on first use, backend "auto"."""
    global _default
    with _default_lock:
        if _default is None or _default._handle is None:
            _default = Context()
        return _default


def resolve(ctx):
    return ctx if ctx is not None else default_context()
