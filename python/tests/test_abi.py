"""The ctypes structs against the C header: every field at the offset the C compiler puts
it, every struct of the size it has (a C program built from include/mfact/mfact.h)."""
import ctypes
import pathlib
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
           "mf_ials_report": _lib.IalsReport, "mf_ranking": _lib.Ranking}


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
