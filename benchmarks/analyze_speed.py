"""Analyzer speed: functions analyzed per second, with and without jedi (no cache).

    python benchmarks/analyze_speed.py [--sdist docutils==0.21.2] [--repeat 1]

Measured on the largest built-in project (by number of functions) and on a large pure-Python sdist
downloaded through coderun.envs.sources with a temporary manifest (default: docutils 0.21.2).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from coderun.analyzers import analyze_project
from coderun.analyzers.index import python_files
from coderun.config import load_settings
from coderun.envs.local import find_local_env
from coderun.envs.sources import checkout
from coderun.manifests.schema import all_manifests, load_manifest


def measure(name: str, root: Path, import_root: str, python: Path | None, repeat: int) -> None:
    files = len(python_files(root))
    for use_jedi in (False, True):
        best = best_cpu = None
        for _ in range(repeat):
            t0, c0 = time.perf_counter(), _cpu()
            result = analyze_project(root, import_root=import_root, python=python, use_jedi=use_jedi)
            elapsed, cpu = time.perf_counter() - t0, _cpu() - c0
            best = elapsed if best is None else min(best, elapsed)
            best_cpu = cpu if best_cpu is None else min(best_cpu, cpu)
        n = len(result.functions)
        # Wall time depends on what else the machine runs; CPU time (this process and its finished
        # children: the syntax check, the interpreter probe) is steadier.
        print(f"{name:22} {files:4} files {n:5} functions  jedi={'on ' if use_jedi else 'off'}  "
              f"wall {best:6.2f}s = {n / best:5.0f} functions/s   cpu {best_cpu:6.2f}s = "
              f"{n / best_cpu:5.0f} functions/s  ({len(result.skipped)} files skipped)")


def _cpu() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def largest_builtin(settings) -> tuple:
    best = None
    for m in all_manifests(settings):
        co = checkout(m, settings)
        n = sum((co.path / f).stat().st_size for f in python_files(co.path))  # bytes of Python
        if best is None or n > best[2]:
            best = (m, co, n)
    return best[0], best[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sdist", default="docutils==0.21.2", help="a pure-Python sdist on PyPI")
    ap.add_argument("--repeat", type=int, default=1, help="runs per configuration (best is kept)")
    args = ap.parse_args()
    settings = load_settings()

    manifest, co = largest_builtin(settings)
    env = find_local_env(manifest, settings)
    python = env.python if env is not None and Path(env.python).exists() else None
    print(f"largest built-in project: {manifest.name} (python: {'its environment' if python else 'host'})")
    measure(manifest.name, co.path, manifest.import_root, python, args.repeat)

    with tempfile.TemporaryDirectory() as tmp:
        name = args.sdist.split("==")[0].lower()
        path = Path(tmp) / f"{name}.yaml"
        path.write_text(f'name: {name}\nsource:\n  pypi: "{args.sdist}"\npython: "3.11"\n')
        big = load_manifest(path)
        big_co = checkout(big, settings)
    print(f"large pure-Python sdist: {args.sdist} (host python)")
    measure(args.sdist, big_co.path, ".", None, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
