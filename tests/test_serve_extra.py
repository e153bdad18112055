"""The verdict service's web framework is an extra (`coderun[serve]`): without it every other command works
and `coderun serve` says how to install it. CI's quick start found `coderun eval` failing with
"No module named 'fastapi'" when the CLI imported the service at start-up."""

from __future__ import annotations

import os
import subprocess
import sys

# fastapi and uvicorn made unimportable (None in sys.modules), then the CLI run as the entry point runs it.
RUN = ("import sys; sys.modules['fastapi'] = sys.modules['uvicorn'] = None; sys.argv[0] = 'coderun'; "
       "from coderun.cli.main import main; main()")


def _coderun(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", RUN, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "200"})


def test_other_commands_run_without_the_serve_extra():
    done = _coderun("eval", "--help")
    assert done.returncode == 0, done.stderr
    assert "--ground-truth" in done.stdout


def test_serve_without_its_extra_says_how_to_install_it():
    done = _coderun("serve", "--openapi")
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    said = " ".join(done.stderr.split())
    assert "coderun serve needs fastapi" in said and "pip install 'coderun[serve]'" in said, said
