"""Where the benchmarks find CoderEval's released data: `--data DIR`, else `../shared/codereval` beside the
repository (where CI and the developers' machines keep it)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT = REPO.parent / "shared" / "codereval"


def add_data_option(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--data", type=Path, default=DEFAULT,
                    help=f"folder of CoderEval's released files (default: {DEFAULT})")


def codereval_data(folder: Path, *names: str) -> Path:
    """`folder`, after checking that it holds `names`; exits with a message saying what is missing."""
    missing = [n for n in names if not (folder / n).is_file()]
    if missing:
        sys.exit(f"CoderEval data not found: {', '.join(str(folder / n) for n in missing)} "
                 "(pass --data DIR, the folder holding CoderEval's released files)")
    return folder
