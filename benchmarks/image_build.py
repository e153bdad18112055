"""Docker image build times and sizes: the base image and each project's image, cold and warm.

Cold: a fresh $CODERUN_HOME (temp dir: sdists, rootfs tarball and wheelhouse are made again) and a
recipe version of its own, so every tag is new and nothing comes from the engine's cache either.
Warm: the same build again, which must be a cache hit (the "under 5 s" figure), timed both in-process
and as the `coderun images build` command a user runs. The benchmark's images are removed at the end
unless --keep.

    python benchmarks/image_build.py [--python 3.9] [PROJECT ...]     (default: cachetools python-dateutil)

Needs a Docker engine (.ci/docker-setup.sh), root for debootstrap, and PyPI/Debian mirror access.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coderun.config import load_settings
from coderun.envs import base_image, dockerlib
from coderun.envs.docker import build_project_image
from coderun.manifests.schema import find_manifest


def _size_mb(client, tag: str) -> float:
    return client.images.get(tag).attrs["Size"] / 1e6


def _timed(fn):
    started = time.monotonic()
    result = fn()
    return result, time.monotonic() - started


def _cli_seconds(args: list[str], env: dict[str, str]) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "coderun", "images", "build", *args], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.monotonic() - started


def _cleanup(client, version: str) -> None:
    """Remove the benchmark's images, children first."""
    order = {layer: i for i, layer in enumerate(reversed(dockerlib.LAYERS))}
    mine = client.images.list(filters={"label": f"{dockerlib.LABEL_PREFIX}.recipe-version={version}"})
    mine.sort(key=lambda im: order.get(im.labels.get(f"{dockerlib.LABEL_PREFIX}.layer"), 9))
    for image in mine:
        for tag in image.tags or [image.id]:
            client.images.remove(tag, force=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("projects", nargs="*", default=["cachetools", "python-dateutil"])
    ap.add_argument("--python", default="3.9", help="base image Python version (default 3.9)")
    ap.add_argument("--keep", action="store_true", help="keep the benchmark's images and home")
    args = ap.parse_args()

    version = f"bench-{int(time.time())}"
    dockerlib.IMAGE_RECIPE_VERSION = version  # new tags everywhere: a truly cold build
    home = Path(tempfile.mkdtemp(prefix="coderun-bench-home-"))
    os.environ["CODERUN_HOME"] = str(home)
    settings = load_settings()
    client = dockerlib.docker_client()
    rows = []
    try:
        base, cold = _timed(lambda: base_image.build_base_image(args.python, settings, client=client))
        _, warm = _timed(lambda: base_image.build_base_image(args.python, settings, client=client))
        rows.append((f"base py{args.python} ({base.strategy.value})", cold, warm,
                     _size_mb(client, base.tag), 0.0))
        base_size = _size_mb(client, base.tag)
        for name in args.projects:
            manifest = find_manifest(name, settings)
            image, cold = _timed(lambda m=manifest: build_project_image(m, settings, client=client))
            again, warm = _timed(lambda m=manifest: build_project_image(m, settings, client=client))
            assert again.built == (), f"{name}: the second build was not a cache hit ({again.built})"
            size = _size_mb(client, image.tag)
            counts = image.baseline.counts()
            rows.append((f"{manifest.name} ({counts['passed']} passed, {counts['failed']} failed)", cold, warm,
                         size, size - base_size))
    finally:
        print_table(rows)
        if not args.keep:
            _cleanup(client, version)
            subprocess.run(["rm", "-rf", str(home)], check=False)
    _cli_warm(args)


def _cli_warm(args) -> None:  # the user's real recipe version and cache, in a new process
    """Warm `coderun images build` in a new process, against the user's real cache (built if missing)."""
    env = dict(os.environ)
    env.pop("CODERUN_HOME", None)
    subprocess.run([sys.executable, "-m", "coderun", "images", "build", *args.projects], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    seconds = _cli_seconds(args.projects, env)
    print(f"\nwarm `coderun images build {' '.join(args.projects)}` (new process, all cache hits): "
          f"{seconds:.2f} s total")


def print_table(rows) -> None:
    print(f"\n{'image':45} {'cold s':>8} {'warm s':>8} {'size MB':>9} {'over base':>10}")
    for name, cold, warm, size, over in rows:
        print(f"{name:45} {cold:8.1f} {warm:8.2f} {size:9.1f} {over:10.1f}")


if __name__ == "__main__":
    main()
