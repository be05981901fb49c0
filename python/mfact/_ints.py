"""Python integers to the C library's integer fields and arguments, checked.

ctypes wraps an integer that does not fit its C type without a word (a struct field of
c_int set to 2**40 reads back 0; c_uint64 set to -1 is 2**64 - 1), so every integer the
binding hands to the library (ranks, iterations, seeds, shapes, counts, top-N, ids) goes
through `to_c` first: an integer of the C type's range, or a RangeError naming the
parameter and the range. What the range means for the algorithm (a rank of 1..512) stays
the library's to check and name."""
import operator

INT32 = ("int32", -2**31, 2**31 - 1)   # int32_t, and int (32 bits on every target)
INT64 = ("int64", -2**63, 2**63 - 1)
UINT64 = ("uint64", 0, 2**64 - 1)
SIZE = ("size_t", 0, 2**64 - 1)        # 64-bit targets only (the library's)
INT32_MAX = INT32[2]


class RangeError(OverflowError, ValueError):
    """An integer outside what its C field or argument holds: both an OverflowError (as
    Python's own conversions say it) and a ValueError (a bad argument value)."""


class IdError(IndexError, ValueError):
    """A user or item id that is not one of the model's (negative, or past its count)."""


def to_c(value, name, ctype=INT32, lo=None, hi=None):
    """`value` (the parameter `name`, as messages say it: "mfact.ALS: rank") as a Python
    int within the C type `ctype` (INT32, INT64, UINT64, SIZE), and
    within lo..hi where given (a range the binding knows better than the type: a seed is
    0..2**64-1, a shape 0..2**31-1). Integers of any kind are taken (NumPy's too), and a
    float only when it is a whole number (1e6); anything else is a TypeError."""
    kind, tmin, tmax = ctype
    lo = tmin if lo is None else max(lo, tmin)
    hi = tmax if hi is None else min(hi, tmax)
    if isinstance(value, bool):
        v = int(value)
    else:
        try:
            v = operator.index(value)
        except TypeError:
            v = None
            if isinstance(value, float) or type(value).__module__ == "numpy":
                try:
                    f = float(value)
                except (TypeError, ValueError):
                    f = None
                if f is not None and f.is_integer():
                    v = int(f)
                elif f is not None:
                    raise TypeError(f"{name} must be an integer, not {value!r}") \
                        from None
            if v is None:
                raise TypeError(f"{name} must be an integer, not "
                                f"{type(value).__name__}") from None
    if not lo <= v <= hi:
        where = f"{kind}: {tmin}..{tmax}" if (lo, hi) == (tmin, tmax) else f"{lo}..{hi}"
        raise RangeError(f"{name} = {v} is out of range ({where})")
    return v


def opt_int(value, name, ctype=INT32, lo=None, hi=None):
    """to_c, with None passed through (a parameter left to the library's default)."""
    return None if value is None else to_c(value, name, ctype, lo, hi)
