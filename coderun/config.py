"""Settings read once, at the edge: where coderun keeps its caches and where it finds manifests."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coderun.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

PACKAGE_DIR = Path(__file__).resolve().parent


def _data_dir(name: str) -> Path:
    """`projects/` and `images/` live inside the wheel, or beside the package in a checkout."""
    bundled = PACKAGE_DIR / "_data" / name
    return bundled if bundled.is_dir() else PACKAGE_DIR.parent / name


BUILTIN_PROJECTS_DIR = _data_dir("projects")
IMAGES_DIR = _data_dir("images")


@dataclass(frozen=True)
class Settings:
    home: Path
    project_dirs: tuple[Path, ...] = field(default_factory=tuple)
    # Folders of local git mirrors (bare repositories or OWNER+NAME.git.tar.gz archives), looked in before
    # the network: CODERUN_GIT_MIRRORS, else `git_mirrors` in the config file.
    git_mirrors: tuple[Path, ...] = field(default_factory=tuple)
    # A Docker registry (HOST[:PORT][/PATH]) project images are pulled from before they are built:
    # CODERUN_REGISTRY, else `registry` in the config file's [images]; `--registry` overrides both.
    registry: str | None = None

    @property
    def git_cache(self) -> Path:
        return self.home / "git"

    @property
    def sdist_cache(self) -> Path:
        return self.home / "sdists"

    @property
    def sources(self) -> Path:
        return self.home / "src"

    @property
    def envs(self) -> Path:
        return self.home / "envs"

    @property
    def wheelhouse(self) -> Path:
        return self.home / "wheelhouse"

    @property
    def analysis_cache(self) -> Path:
        return self.home / "analysis"

    @property
    def runs(self) -> Path:
        return self.home / "runs"

    @property
    def store_path(self) -> Path:
        return self.home / "store.sqlite"


def home_dir() -> Path:
    """coderun's home: CODERUN_HOME, else ~/.cache/coderun."""
    return Path(os.environ.get("CODERUN_HOME") or Path.home() / ".cache" / "coderun").expanduser()


def read_kept(name: str) -> Any:
    """What `keep(name, ...)` left in the home for later processes; None when there is none or it is unreadable."""
    with contextlib.suppress(OSError, ValueError):
        return json.loads((home_dir() / name).read_text(encoding="utf-8"))
    return None


def keep(name: str, data: Any) -> None:
    """Leave `data` (JSON) in the home for later processes, whole or not at all (a temporary file renamed:
    two processes starting together both write). A home that cannot be written keeps nothing."""
    with contextlib.suppress(OSError):
        path = home_dir() / name
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)


def load_settings(extra_project_dirs: list[Path] | None = None) -> Settings:
    home = home_dir()
    dirs = [Path(p).expanduser() for p in os.environ.get("CODERUN_PROJECTS", "").split(os.pathsep) if p]
    dirs += list(extra_project_dirs or [])
    return Settings(home=home, project_dirs=tuple(dirs), git_mirrors=_git_mirrors(), registry=_registry())


def config_path() -> Path:
    """CODERUN_CONFIG, else $XDG_CONFIG_HOME/coderun/config.toml (~/.config/coderun/config.toml)."""
    if os.environ.get("CODERUN_CONFIG"):
        return Path(os.environ["CODERUN_CONFIG"]).expanduser()
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config").expanduser()
    return base / "coderun" / "config.toml"


def _git_mirrors() -> tuple[Path, ...]:
    env = os.environ.get("CODERUN_GIT_MIRRORS")
    if env is not None:
        return tuple(Path(p).expanduser().resolve() for p in env.split(os.pathsep) if p)
    path = config_path()
    value = _read_config(path).get("sources", {}).get("git_mirrors", [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: [sources] git_mirrors must be a list of folder paths, got {value!r}",
                          hint='git_mirrors = ["~/mirrors"]')
    # Relative entries are relative to the config file, as in pip's and git's own files.
    return tuple((path.parent / Path(v).expanduser()).resolve() for v in value)


def _registry() -> str | None:
    if os.environ.get("CODERUN_REGISTRY") is not None:
        return os.environ["CODERUN_REGISTRY"].strip() or None
    path = config_path()
    value = _read_config(path).get("images", {}).get("registry")
    if value is not None and not isinstance(value, str):
        raise ConfigError(f"{path}: [images] registry must be a string, got {value!r}",
                          hint='registry = "registry.example.org:5000/team"')
    return value or None


def _read_config(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ConfigError(f"{path}: cannot read coderun's config file: {e}",
                          hint="fix the TOML, or point CODERUN_CONFIG at another file") from None
