"""Ids as users have them: the maps of mf_id_map (a file's user and item ids, by dense
index) as Python lists, and back. Ids are text in the library; a map whose every id is a
plain decimal integer ("193609", not "007") comes back as ints, so that `model.recommend(196,
ids=True)` takes the MovieLens user as it is written."""
import contextlib
import ctypes

from . import _lib
from ._errors import Unsupported, check
from ._text import c_text


def _missing(what):
    return Unsupported(f"mfact: the loaded libmfact ({_lib.library_path}) has no id maps "
                       f"(mf_id_map_*): {what} needs a newer library")


def from_c(handle):
    """The ids of an mf_id_map handle in index order (ints where all are integers), or None
    for a NULL handle."""
    if not handle:
        return None
    n = _lib.mf_id_map_count(handle)
    ids = [_lib.mf_id_map_id(handle, i).decode("utf-8", "surrogateescape") for i in range(n)]
    if all(_plain_int(s) for s in ids):
        return [int(s) for s in ids]
    return ids


def _plain_int(s):
    """Whether s is an integer written as str(int(s)) writes it."""
    digits = s[1:] if s.startswith("-") else s
    return digits.isascii() and digits.isdigit() and str(int(s)) == s


def text(i):
    """An id as the library holds it."""
    return c_text(i if isinstance(i, str) else str(int(i)), "mfact: an id", "surrogateescape")


@contextlib.contextmanager
def to_c(ctx, ids, what):
    """A temporary mf_id_map of `ids` (None: a NULL handle) for the duration of a call."""
    if ids is None:
        yield None
        return
    if _lib.mf_id_map_create is None:
        raise _missing(what)
    words = [text(i) for i in ids]
    arr = (ctypes.c_char_p * max(len(words), 1))(*words)
    handle = ctypes.c_void_p()
    check(_lib.mf_id_map_create(ctx.handle, ctypes.byref(handle), len(words), arr),
          ctx.handle, what)
    try:
        yield handle.value
    finally:
        _lib.mf_id_map_destroy(handle.value)


def index(ids, cache, wanted):
    """Indices of the ids `wanted` (a scalar or a sequence) in the list `ids`, through the
    dict `cache` (built on first use); an id the list lacks gets len(ids) + k for its k-th
    first appearance (unseen: past the model). Returns (indices, scalar, unseen)."""
    if not cache:
        cache.update({str(v): i for i, v in enumerate(ids)})
    scalar = isinstance(wanted, (str, bytes, int)) or getattr(wanted, "ndim", 1) == 0
    seq = [wanted] if scalar else list(wanted)
    out, unseen = [], {}
    for w in seq:
        key = w.decode() if isinstance(w, bytes) else w if isinstance(w, str) else str(int(w))
        i = cache.get(key)
        if i is None:
            i = unseen.setdefault(key, len(ids) + len(unseen))
        out.append(i)
    return out, scalar, list(unseen)
