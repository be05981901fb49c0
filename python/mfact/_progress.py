"""The progress callback of the iterative runs: a tqdm bar (show_progress=True), a user
callable (given each step's record as a dict; returning True stops the run, which then
ends normally with the last completed step's result), and Ctrl-C, which cancels the run cleanly through the callback's return value
(the library stops after the iteration, its buffers consistent) and is raised again once
the call has returned."""
import ctypes


class Progress:
    def __init__(self, total, unit, show_progress, callback, fields):
        self.total, self.unit = total, unit
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
            return 0
        except KeyboardInterrupt:
            self.interrupted = True
            return 1
        except BaseException as e:  # never let an exception unwind through C
            self.error = e
            return 1

    def close(self):
        if self.bar is not None:
            self.bar.close()

    def settle(self, status, cancelled):
        """After the run: Ctrl-C or the callback's own exception raised here; a stop the
        callback asked for is a normal end (the factors hold the last completed step).
        Returns the status left to check."""
        if status != cancelled:
            return status
        if self.interrupted:
            raise KeyboardInterrupt
        if self.error is not None:
            raise self.error
        return 0 if self.stopped else status


def make(fn_type, progress):
    """The ctypes function pointer (kept alive by the caller) or NULL."""
    return fn_type(progress) if progress is not None else ctypes.cast(None, fn_type)
