"""The ctypes structs against the C header: every field at the offset the C compiler puts
it, every struct of the size it has (a C program built from include/mfact/mfact.h); every
bound function's prototype against its declaration there."""
import ctypes
import pathlib
import re
import shutil
import subprocess

import pytest

from mfact import _lib
from conftest import REPO

STRUCTS = {"mf_ctx_opts": _lib.CtxOpts, "mf_read_opts": _lib.ReadOpts,
           "mf_progress": _lib.Progress, "mf_biases": _lib.Biases, "mf_model": _lib.Model,
           "mf_als_opts": _lib.AlsOpts, "mf_als_report": _lib.AlsReport,
           "mf_sgd_opts": _lib.SgdOpts, "mf_sgd_report": _lib.SgdReport,
           "mf_bmf_progress": _lib.BmfProgress, "mf_bmf_opts": _lib.BmfOpts,
           "mf_bmf_report": _lib.BmfReport, "mf_asd_opts": _lib.AsdOpts,
           "mf_asd_report": _lib.AsdReport, "mf_ials_opts": _lib.IalsOpts,
           "mf_ials_report": _lib.IalsReport, "mf_ranking": _lib.Ranking,
           "mf_model_save_opts": _lib.ModelSaveOpts, "mf_group_stats": _lib.GroupStats}


# Macros of the header that the binding copies.
CONSTANTS = {"MF_NCCL_ID_BYTES": _lib.NCCL_ID_BYTES}


def header():
    for path in (REPO / "include", pathlib.Path(_lib._HERE) / "include"):
        if (path / "mfact" / "mfact.h").exists():
            return path
    pytest.skip("mfact.h not found")


def c_layout(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if not cc:
        pytest.skip("no C compiler")
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <mfact/mfact.h>",
             "int main(void) {"]
    for cname, py in STRUCTS.items():
        lines.append(f'printf("{cname} size %zu\\n", sizeof({cname}));')
        for field, _ in py._fields_:
            cfield = field.rstrip("_")
            lines.append(f'printf("{cname} {field} %zu\\n", offsetof({cname}, {cfield}));')
    for name, value in CONSTANTS.items():
        lines.append(f'printf("{name} value %lld\\n", (long long)({name}));')
    lines.append("return 0; }")
    src = tmp_path / "layout.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-I", str(header()), str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return {tuple(line.split()[:2]): int(line.split()[2]) for line in out.splitlines()}


def test_structs_match_the_header(tmp_path):
    layout = c_layout(tmp_path)
    for cname, py in STRUCTS.items():
        assert ctypes.sizeof(py) == layout[(cname, "size")], cname
        for field, _ in py._fields_:
            assert getattr(py, field).offset == layout[(cname, field)], f"{cname}.{field}"


def test_constants_match_the_header(tmp_path):
    layout = c_layout(tmp_path)
    for name, value in CONSTANTS.items():
        assert layout[(name, "value")] == value, name


# ---- prototypes: each bound function's argtypes and restype against mfact.h ----------------
SCALARS = {"int": ctypes.c_int, "unsigned": ctypes.c_uint, "unsigned int": ctypes.c_uint,
           "size_t": ctypes.c_size_t, "double": ctypes.c_double, "float": ctypes.c_float,
           "int32_t": ctypes.c_int32, "int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64,
           "char": ctypes.c_char}


def declarations():
    """{name: (return type, [parameter types])} of every MF_API function in mfact.h, each
    type as (base, pointer depth): `const mf_ctx *ctx` is ("mf_ctx", 1)."""
    text = (header() / "mfact" / "mfact.h").read_text()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    enums = set(re.findall(r"typedef\s+enum\s+\w*\s*\{[^}]*\}\s*(\w+)\s*;", text))

    def parse(decl, named):
        words = re.findall(r"[A-Za-z_]\w*|\*|\[", decl)
        words = [w for w in words if w != "const"]
        if named:
            words = words[:-1] if words[-1] != "[" else words[:-2] + ["*"]  # drop the name
        depth = words.count("*") + words.count("[")
        base = " ".join(w for w in words if w not in ("*", "["))
        return ("int" if base in enums else base), depth

    out = {}
    for ret, name, params in re.findall(
            r"MF_API\s+([\w\s\*]+?)\b(mf_\w+)\s*\(([^)]*)\)\s*;", text):
        params = [p for p in params.split(",") if p.strip()]
        if [p.strip() for p in params] == ["void"]:
            params = []
        out[name] = (parse(ret, False), [parse(p, True) for p in params])
    return out


def compatible(ctype, base, depth):
    """Whether ctypes type `ctype` passes (or returns) a C `base` with `depth` stars: scalars
    exactly (enums as int), a pointer as c_void_p (the binding's data and handles), char *
    as c_char_p, or POINTER of what it points to (structs as their ctypes mirrors)."""
    if depth == 0:
        if base == "void":
            return ctype is None
        if base in SCALARS:
            return ctype is SCALARS[base]
        return base in STRUCTS and ctype is STRUCTS[base]
    if ctype is ctypes.c_void_p or (depth == 1 and base == "char" and ctype is ctypes.c_char_p):
        return True
    if isinstance(ctype, type) and issubclass(ctype, ctypes._Pointer):
        return compatible(ctype._type_, base, depth - 1)
    return False


def test_prototypes_match_the_header():
    decls = declarations()
    assert "mf_als_run" in decls and "mf_ctx_create" in decls  # the parser found them
    for name, fn in _lib.PROTOTYPES.items():
        assert name in decls, f"{name} is bound but not declared in mfact.h"
        (ret, params) = decls[name]
        assert compatible(fn.restype, *ret), f"{name}: returns {ret}, bound {fn.restype}"
        assert len(fn.argtypes) == len(params), f"{name}: {len(params)} parameters in C"
        for i, (have, want) in enumerate(zip(fn.argtypes, params)):
            assert compatible(have, *want), f"{name}: parameter {i} is {want}, bound {have}"
    # The groups of processes (mfact.Context.join) are bound wherever the header has them.
    groups = {"mf_ctx_rank", "mf_ctx_set_mpi_comm", "mf_nccl_make_id", "mf_ctx_join_nccl_id",
              "mf_launch_detect", "mf_ctx_join_launched", "mf_ctx_group_stats"}
    assert groups & set(decls) <= set(_lib.PROTOTYPES)
    # So are the saved models (model.save, mfact.load).
    saved = {"mf_model_save_opts_init_sized", "mf_model_save", "mf_model_load",
             "mf_saved_model_view", "mf_saved_model_algorithm", "mf_saved_model_options",
             "mf_saved_model_library_version", "mf_saved_model_destroy"}
    assert saved & set(decls) <= set(_lib.PROTOTYPES)


def test_the_prototype_check_catches_mistakes():
    """compatible() itself: a wrong width, a pointer for a scalar, the wrong struct."""
    assert compatible(ctypes.c_int, "int", 0)
    assert not compatible(ctypes.c_double, "int", 0)
    assert not compatible(ctypes.c_int, "size_t", 0)
    assert not compatible(ctypes.c_void_p, "int", 0)
    assert compatible(ctypes.POINTER(ctypes.c_int), "int", 1)
    assert not compatible(ctypes.POINTER(ctypes.c_int64), "int", 1)
    assert compatible(ctypes.POINTER(_lib.AlsOpts), "mf_als_opts", 1)
    assert not compatible(ctypes.POINTER(_lib.SgdOpts), "mf_als_opts", 1)
    assert compatible(ctypes.POINTER(ctypes.c_void_p), "mf_ctx", 2)
    assert compatible(ctypes.c_char_p, "char", 1) and not compatible(ctypes.c_char_p, "int", 1)
    assert compatible(None, "void", 0) and not compatible(ctypes.c_int, "void", 0)
