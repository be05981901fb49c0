"""The newcomer's workflow of tests/tool/check-newcomer.sh (issue 44): a CSV with string
ids, a time split with unseen users and items, trained, saved and loaded in new processes,
predictions and lists in the file's ids from the tool and from this package, checked
against each other bit for bit. Needs the tool (MFACT_CLI, as scripts/python-test sets it)."""
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import REPO


def test_newcomer_script():
    cli = pathlib.Path(os.environ.get("MFACT_CLI", REPO / "build" / "cli" / "mfact"))
    if not cli.exists():
        pytest.skip(f"the mfact tool is not built ({cli})")
    script = REPO / "tests" / "tool" / "check-newcomer.sh"
    run = subprocess.run([str(script), str(cli), sys.executable], capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "python: " in run.stdout and "newcomer ok" in run.stdout, run.stdout[-2000:]
