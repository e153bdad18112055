"""Settings read once, at the edge: where coderun keeps its caches and where it finds manifests."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

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


def load_settings(extra_project_dirs: list[Path] | None = None) -> Settings:
    home = Path(os.environ.get("CODERUN_HOME") or Path.home() / ".cache" / "coderun").expanduser()
    dirs = [Path(p).expanduser() for p in os.environ.get("CODERUN_PROJECTS", "").split(os.pathsep) if p]
    dirs += list(extra_project_dirs or [])
    return Settings(home=home, project_dirs=tuple(dirs))
