"""Reading a project's configuration files: TOML, ini (setup.cfg, tox.ini), and pytest's own settings."""

from __future__ import annotations

import configparser
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - python 3.10
    import tomli as tomllib


def read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return {}


def read_cfg(path: Path) -> configparser.ConfigParser | None:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, configparser.Error):
        return None
    return parser


def cfg_lines(value: str | None) -> list[str]:
    out = []
    for line in (value or "").splitlines():
        line = line.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def pytest_ini(tree: Path) -> tuple[dict[str, object], str | None]:
    """pytest's own configuration, from the file pytest would read first."""
    if (tree / "pytest.ini").is_file():
        cfg = read_cfg(tree / "pytest.ini")
        if cfg and cfg.has_section("pytest"):
            return dict(cfg.items("pytest")), "pytest.ini"
    opts = read_toml(tree / "pyproject.toml").get("tool", {}).get("pytest", {}).get("ini_options")
    if opts is not None:
        return dict(opts), "pyproject.toml [tool.pytest.ini_options]"
    for fname, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest"), ("setup.cfg", "pytest")):
        cfg = read_cfg(tree / fname) if (tree / fname).is_file() else None
        if cfg and cfg.has_section(section):
            return dict(cfg.items(section)), f"{fname} [{section}]"
    return {}, None


def words(value: object) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    return str(value or "").split()
