"""A project's venv, with the pip and setuptools `python -m venv` gives it, made in a tenth of the time.

`python -m venv` spends about 2 of its 2-3 s in ensurepip: a pip run that installs ensurepip's bundled
wheels and byte-compiles every file of them. Here the venv is made `--without-pip` and the same wheels (the
ones the interpreter's ensurepip names) are unpacked into it with pypa's `installer`; their bytecode is
written when they are first imported, as for any package in the venv. Where the interpreter's ensurepip does
not name wheels that exist (a distribution that strips them), ensurepip runs as `python -m venv` would run it.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

from installer import install
from installer.destinations import SchemeDictionaryDestination
from installer.sources import WheelFile

# Run by the venv's python (3.7 and later): the wheels its ensurepip would install, and the venv's paths.
_ASK = r"""
import ensurepip, json, os, sys, sysconfig
here = os.path.join(os.path.dirname(ensurepip.__file__), "_bundled")
if hasattr(ensurepip, "_get_packages"):  # 3.10, 3.11
    wheels = [p.wheel_path or os.path.join(here, p.wheel_name) for p in ensurepip._get_packages().values()]
elif hasattr(ensurepip, "_PROJECTS"):  # 3.7 - 3.9
    wheels = [os.path.join(here, "%s-%s-%s-none-any.whl" % p) for p in ensurepip._PROJECTS]
else:  # 3.12 and later: pip alone
    with ensurepip._get_pip_whl_path_ctx() as path:
        wheels = [str(path)]
print(json.dumps({"wheels": wheels, "paths": sysconfig.get_paths(), "minor": "%d.%d" % sys.version_info[:2]}))
"""

Run = Callable[[list[str], str], None]   # runs and logs a command (argv, what it does); raises if it fails


def make_venv(python: Path, venv: Path, run: Run) -> None:
    """Make `venv` for `python` with pip (and setuptools before 3.12)."""
    run([str(python), "-m", "venv", "--without-pip", str(venv)], "creating the venv")
    python_in_venv = venv / "bin" / "python"
    found = _ask(python_in_venv)
    wheels = [Path(w) for w in found.get("wheels", ())]
    if not wheels or not all(w.is_file() for w in wheels):
        run([str(python_in_venv), "-m", "ensurepip", "--upgrade", "--default-pip"], "installing pip (ensurepip)")
        return
    scripts = Path(found["paths"]["scripts"])
    for wheel in wheels:  # the scripts' interpreter is the one ensurepip runs as: bin/pythonX.Y
        _unpack(wheel, found["paths"], scripts / f"python{found['minor']}")
    _name_scripts_for(found["minor"], scripts, Path(found["paths"]["purelib"]))


def _ask(venv_python: Path) -> dict:
    done = subprocess.run([str(venv_python), "-c", _ASK], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          timeout=60, check=False)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else {}
    except (ValueError, IndexError):
        return {}


def _unpack(wheel: Path, paths: dict[str, str], venv_python: Path) -> None:
    scheme = {key: paths[key] for key in ("purelib", "platlib", "scripts", "data")}
    scheme["headers"] = str(Path(paths["include"]) / wheel.name.split("-")[0])
    destination = SchemeDictionaryDestination(scheme, interpreter=str(venv_python), script_kind="posix",
                                              bytecode_optimization_levels=())
    with WheelFile.open(wheel) as source:
        install(source, destination, additional_metadata={"INSTALLER": b"pip\n", "REQUESTED": b""})


def _name_scripts_for(minor: str, scripts: Path, purelib: Path) -> None:
    """The wheels name `pip3.X` and `easy_install-3.X` after the Python they were built with; pip renames
    them after the one it installs for (in the RECORD too, which `pip uninstall` reads)."""
    for stem in ("pip", "easy_install-"):
        for script in scripts.glob(f"{stem}3.*"):
            name = f"{stem}{minor}"
            if script.name == name:
                continue
            script.rename(scripts / name)
            for record in purelib.glob("*.dist-info/RECORD"):
                text = record.read_text(encoding="utf-8")
                record.write_text(text.replace(f"/{script.name},", f"/{name},"), encoding="utf-8")
