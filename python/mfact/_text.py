"""Python strings to the C library's NUL-terminated ones, checked.

ctypes passes bytes as char * and the library reads up to the first NUL, so "a.mfm\0x"
would name the file "a.mfm" (a save would overwrite it) and the id "a\0x" would become "a".
Python's own open() refuses such a path; so does the binding, for every string it hands
over."""
import os


def c_text(value, name, errors="strict"):
    """`value` (str, or bytes as they are) as UTF-8 bytes without a NUL, else ValueError
    naming the parameter `name`."""
    raw = value if isinstance(value, bytes) else value.encode("utf-8", errors)
    if b"\0" in raw:
        raise ValueError(f"{name}: {value!r} holds a NUL character")
    return raw


def c_path(path, name):
    """A path (str, bytes or os.PathLike) as the file system's bytes, refusing a NUL."""
    raw = os.fsencode(path)
    if b"\0" in raw:
        raise ValueError(f"{name}: the path {path!r} holds a NUL character")
    return raw
