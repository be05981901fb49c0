"""The progress callback of the iterative runs: a tqdm bar (show_progress=True), a user
callable (given each step's record as a dict; returning True stops the run, which then
ends normally with the last completed step's result), and Ctrl-C.

Ctrl-C: for the duration of a run (`sigint()`), on the main thread and where SIGINT has
Python's own handler, a SIGINT only sets a flag. The run's progress callback (installed for
this even without a bar or a callable) reads the flag after each step and asks the library
to stop, which it does after the step, its buffers consistent (MF_ERR_CANCELLED, the
factors of the last completed step); once the call has returned, KeyboardInterrupt is
raised. A KeyboardInterrupt can then never land inside the ctypes callback's machinery
(where ctypes would print its traceback and carry on) nor turn into mfact.Cancelled."""
import contextlib
import ctypes
import signal
import threading


_checks = False  # set_interrupt_checks


def set_interrupt_checks(enabled):
    """Whether a fit on the main thread with neither a bar nor a callable still installs
    the progress callback so that Ctrl-C stops it after the current iteration (True), or
    runs without one, Ctrl-C then raising KeyboardInterrupt once the whole fit has returned
    (False, the default). A callback makes the library measure each iteration (the train
    and test RMSE; ImplicitALS's loss), which costs: on 2 CPU cores at rank 32, +11 % for
    ALS, +33 % for SGD, +22 % for ImplicitALS; so a fit pays it only where asked (here, or
    with a bar or a callable, which stop at the next iteration anyway). Returns the
    previous setting."""
    global _checks
    previous, _checks = _checks, bool(enabled)
    return previous


class _Sigint:
    """What a SIGINT during a run leaves: `caught`. `active` when this run's handler is
    installed (the main thread, Python's default handler in place before)."""

    def __init__(self):
        self.caught = False
        self.active = False
        self._previous = None

    def _handler(self, signum, frame):
        self.caught = True  # never raise here: this may run inside the ctypes callback

    def install(self):
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
                return  # the application's own handler (or a run already guarded) stays
            self._previous = signal.signal(signal.SIGINT, self._handler)
        except (ValueError, OSError):  # no signals here (an embedded interpreter)
            return
        self.active = True

    def poll(self):
        """Let a SIGINT that arrived during the C call reach the handler (Python runs
        signal handlers when it next enters Python code: this call)."""
        return self.caught

    def restore(self):
        if self.active:
            self.poll()
            signal.signal(signal.SIGINT, self._previous)
            self.active = False


@contextlib.contextmanager
def sigint():
    """Ctrl-C caught as a flag for the duration of a run (see the module's comment)."""
    s = _Sigint()
    s.install()
    try:
        yield s
    finally:
        s.restore()
    if s.caught:  # a run without a callback to read the flag: raised after the whole run
        raise KeyboardInterrupt


def tracker(sig, total, unit, show_progress, callback, fields):
    """The run's Progress: for a bar, a callable, or Ctrl-C (a flag to read after each
    step); None when there is none of them (not the main thread, no bar, no callable)."""
    if not (show_progress or callback is not None or (sig.active and _checks)):
        return None
    return Progress(total, unit, show_progress, callback, fields, sig)


class Progress:
    def __init__(self, total, unit, show_progress, callback, fields, sig=None):
        self.total, self.unit = total, unit
        self.sig = sig
        # The records are kept (`history`) where a bar or a callable asked for progress.
        self.recording = bool(show_progress) or callback is not None
        # Record keys, each the C field's name or a (key, field) pair that renames it.
        self.fields = [f if isinstance(f, tuple) else (f, f) for f in fields]
        self.callback = callback
        self.bar = None
        self.interrupted = False
        self.stopped = False  # the user's callback asked to stop: not an error
        self.error = None
        if show_progress:
            try:
                from tqdm.auto import tqdm
            except ImportError as e:  # an optional dependency: say how to get it
                raise ImportError("mfact: show_progress=True needs tqdm "
                                  "(pip install tqdm)") from e
            self.bar = tqdm(total=total, unit=unit)
        self.history = []

    def __call__(self, user, p):
        """The C callback: nonzero stops the run."""
        try:
            if self.sig is not None and self.sig.caught:
                self.interrupted = True
                return 1
            if not self.recording:
                return 0
            rec = {name: getattr(p.contents, attr) for name, attr in self.fields}
            self.history.append(rec)
            # BMF's Asso start reports its rounds as sweep 0: not a step of the bar
            if self.bar is not None and rec.get("sweep", 1) != 0:
                self.bar.update(1)
                self.bar.set_postfix({k: v for k, v in rec.items() if "rmse" in k or
                                      k in ("error", "loss")}, refresh=False)
            if self.callback is not None and self.callback(rec):
                self.stopped = True
                return 1
            if self.sig is not None and self.sig.caught:  # during the callable
                self.interrupted = True
                return 1
            return 0
        except KeyboardInterrupt:
            self.interrupted = True
            return 1
        except BaseException as e:  # never let an exception unwind through C
            self.error = e
            return 1

    @property
    def records(self):
        """The history to keep on the model: None where no bar or callable asked."""
        return self.history if self.recording else None

    def close(self):
        if self.bar is not None:
            self.bar.close()

    def settle(self, status, cancelled):
        """After the run: Ctrl-C or the callback's own exception raised here; a stop the
        callback asked for is a normal end (the factors hold the last completed step).
        Returns the status left to check. A Ctrl-C caught during the run raises
        KeyboardInterrupt whatever the status (the run may have ended before its next
        step's callback saw it)."""
        if self.interrupted or (self.sig is not None and self.sig.poll()):
            raise KeyboardInterrupt
        if status != cancelled:
            return status
        if self.error is not None:
            raise self.error
        return 0 if self.stopped else status


def make(fn_type, progress):
    """The ctypes function pointer (kept alive by the caller) or NULL."""
    return fn_type(progress) if progress is not None else ctypes.cast(None, fn_type)
