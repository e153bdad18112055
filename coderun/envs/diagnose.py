"""Why an environment build failed, read from its log: the first real error and what to edit in the manifest.

A failed pip install or baseline run ends with pages of output; the user needs its cause (a module no
dependency provides → which distribution to add; a pin coderun's harness cannot run with → which pin; a
test path that is not there) and the manifest field that fixes it.
"""

from __future__ import annotations

import re
from pathlib import Path

from coderun.manifests.schema import Manifest

# Standard-library modules removed from Python 3, and the version that removed them.
_REMOVED = {**dict.fromkeys(("imp", "distutils", "asynchat", "asyncore", "smtpd"), "3.12"),
            **dict.fromkeys(("cgi", "cgitb", "crypt", "nntplib", "telnetlib", "uu", "xdrlib", "pipes",
                             "audioop", "chunk", "imghdr", "mailcap", "msilib", "nis", "ossaudiodev", "sndhdr",
                             "spwd", "sunau", "lib2to3"), "3.13")}
_MISSING = re.compile(r"(?:ModuleNotFoundError: No module named|ImportError: No module named) '?([\w.]+)'?")


def _text(log: Path) -> str:
    try:
        return log.read_text(errors="replace")
    except OSError:
        return ""


def baseline_failure(log: Path, manifest: Manifest, exit_code: int) -> tuple[str, str]:
    """(the first real error of a baseline run that did not run, what to edit)."""
    text = _text(log)
    pin = _harness_pin(manifest)
    if pin:
        return pin
    missing = _MISSING.search(text)
    if missing:
        return _missing_module(missing.group(1), manifest)
    absent = re.search(r"ERROR: (?:file or directory not found|file not found|not found): (\S+)", text)
    if absent:
        return (f"{absent.group(1)} is not in the tree",
                "fix tests.paths (or the path in tests.args) in the manifest")
    collecting = re.search(r"_+ ERROR collecting (\S+) _+\n(?:.*\n)*?E +(\S.*)", text)
    if collecting:
        return (f"{collecting.group(1)} cannot be imported: {collecting.group(2).strip()}",
                f"install what it needs (install.requirements), or leave it out with "
                f"`--ignore={collecting.group(1)}` in tests.args")
    usage = re.search(r"(?:pytest|py\.test): error: (.*)", text)
    if usage:
        return f"pytest refused its arguments: {usage.group(1)}", "fix tests.args in the manifest"
    if exit_code == 5:
        return "pytest collected no tests", "check tests.paths and tests.args (python_files) in the manifest"
    error = re.search(r"^(?:E +|INTERNALERROR> +)?(\w+(?:Error|Exception): .*)$", text, re.M)
    if error:
        return error.group(1).strip()[:200], "check install.requirements, tests.paths and tests.args in the manifest"
    return "see the log", "check tests.paths and tests.args in the manifest"


def _missing_module(module: str, manifest: Manifest) -> tuple[str, str]:
    top = module.split(".")[0]
    if top in _REMOVED:
        return (f"No module named {top!r}: Python {_REMOVED[top]} removed it from the standard library, and "
                f"something of the project's time still imports it",
                f"give the manifest an older `python` (before {_REMOVED[top]}) or move install.resolve_as_of to "
                "a date whose releases no longer import it")
    if top == "pkg_resources":
        return ("No module named 'pkg_resources': setuptools releases from 2025 on no longer have it",
                'add "setuptools<70" to install.requirements')
    from coderun.envs.index import releases
    from coderun.envs.providers import distribution_for

    dist = distribution_for(top, set(), lambda n: len(releases(n)))
    return (f"No module named {module!r}: nothing installed provides it",
            f'add "{dist}" (the distribution that provides `{top}`) to install.requirements')


def _harness_pin(manifest: Manifest) -> tuple[str, str] | None:
    from coderun.envs.pins import harness_compatible

    for req in manifest.install.requirements:
        fixed, why = harness_compatible(req)
        if why:
            return (f"install.requirements pins {req}, and {why}",
                    f'replace "{req}" with "{fixed}" in install.requirements')
    return None


def install_failure(log: Path, manifest: Manifest) -> str:
    """What to edit after a failed pip install, from its log."""
    text = _text(log)
    pin = _harness_pin(manifest)
    if pin:
        return f"{pin[0]}: {pin[1]}"
    none = re.search(r"No matching distribution found for (\S+)", text)
    if none:
        return (f"no release of {none.group(1)} installs on Python {manifest.python}: relax or drop its pin in "
                "install.requirements, or change `python`")
    build = re.search(r"(?:Failed to build|Failed building wheel for|Building wheel for) (\S+?)(?:\s|$)(?:.*\n)*?"
                      r".*(?:error|Error)", text)
    if build and "subprocess-exited-with-error" in text:
        return (f"{build.group(1)} does not build on Python {manifest.python}: pin a release of it that has wheels "
                "for that Python in install.requirements, or change `python`")
    conflict = re.search(r"The conflict is caused by:\n((?:\s+.*\n){1,4})", text)
    if conflict:
        lines = "; ".join(line.strip() for line in conflict.group(1).splitlines() if line.strip())
        return f"conflicting requirements ({lines}): relax one of them in install.requirements"
    return "check install.requirements in the manifest"
