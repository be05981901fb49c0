"""mfact.Context: one mf_ctx (a backend, a device, a memory limit, a seed)."""
import ctypes
import threading
import weakref

from . import _lib
from ._errors import check


class Context:
    """A library context. Every call takes one (`ctx=`); without it, the default context
    (backend "auto": CUDA when a device is usable, else the CPU; seed 0) is used.

    >>> with mfact.Context(backend="cpu", threads=2, seed=7) as ctx:
    ...     model = mfact.ALS(rank=32, ctx=ctx).fit(ratings)
    """

    def __init__(self, backend="auto", device=0, memory_limit=0, threads=0, seed=0):
        if backend not in _lib.BACKENDS:
            raise ValueError(f"backend must be one of {sorted(_lib.BACKENDS)}, not {backend!r}")
        opts = _lib.CtxOpts()
        _lib.mf_ctx_opts_init(ctypes.byref(opts))
        opts.backend = _lib.BACKENDS[backend]
        opts.device = int(device)
        opts.device_memory_limit = int(memory_limit)
        opts.cpu_threads = int(threads)
        opts.seed = int(seed)
        handle = ctypes.c_void_p()
        status = _lib.mf_ctx_create(ctypes.byref(handle), ctypes.byref(opts))
        # The failure's message is on the context when one was made, else in the status.
        check(status, handle.value, "mfact.Context")
        self._handle = handle.value
        self.seed = int(seed)
        # One call at a time (the library allows one thread per context, and its last error
        # must be read by the thread whose call failed); matrices die before the context.
        self.lock = threading.RLock()
        self._matrices = weakref.WeakSet()

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
                for m in list(self._matrices):
                    m.close()
                _lib.mf_ctx_destroy(self._handle)
                self._handle = None

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
        state = self.backend if self._handle is not None else "closed"
        return f"mfact.Context({state}, seed={self.seed})"


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
