"""Every built-in project's Docker image: its size and how long it took to build, one project at a time.

    python benchmarks/image_table.py [PROJECT ...] [--record FILE] [--markdown]

Builds the image of each project (default: every built-in one) that is not built yet in $CODERUN_HOME, with the
code `coderun images build` runs, and times it: wheelhouse, dependencies, source and baseline layers, and the
base image (with its Debian root filesystem) when this project is the first to need it. A build is timed only
when this script makes it; the time is kept in FILE (default $CODERUN_HOME/images/build-times.json, one entry
per image tag), so an interrupted sequence goes on where it stopped and a later run prints the same figures. A
project whose build fails is listed with the first line of its error and the others go on. Prints per project:
Python, base, image size, size over the base, build seconds and the layers that build made (a layer already in
the engine, built before by anyone with the same recipe, is reused and not timed), the baseline's passed/failed.
Wall-clock figures depend on the machine's load and the mirrors' speed. Measurement, not product code.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from coderun.config import load_settings
from coderun.envs import dockerlib
from coderun.envs.docker import build_project_image, plan_image
from coderun.errors import CoderunError
from coderun.manifests.schema import find_manifest, known_manifests

HEAD = ["project", "python", "base", "image MB", "over base MB", "build s", "layers built", "baseline passed/failed"]


def _mb(client, tag: str) -> float:
    return client.images.get(tag).attrs["Size"] / 1e6


def row(name: str, settings, client, times: dict[str, dict]) -> list[str]:
    manifest = find_manifest(name, settings)
    try:
        plan = plan_image(manifest, settings, client)
        if plan.tag not in times and not dockerlib.image_exists(client, plan.tag):
            started = time.monotonic()
            built = build_project_image(manifest, settings, client=client).built
            times[plan.tag] = {"seconds": round(time.monotonic() - started, 1), "layers": list(built)}
        image = build_project_image(manifest, settings, client=client)  # a cache hit: the record
    except CoderunError as e:
        return [manifest.name, manifest.python, *["–"] * 5, f"failed: {e.message.splitlines()[0][:80]}"]
    counts = image.baseline.counts()
    size, base = _mb(client, image.tag), _mb(client, image.base_tag)
    timed = times.get(image.tag)
    # Layers someone else built before (the engine is shared, tags are content hashes) were not timed here.
    seconds, layers = (f"{timed['seconds']:.0f}", "+".join(timed["layers"])) if timed else ("–", "none")
    return [manifest.name, manifest.python, plan.base.strategy.value + (" (copied)" if "/opt/python/" in
            plan.base.interpreter else ""), f"{size:.0f}", f"{size - base:.0f}", seconds, layers,
            f"{counts['passed']}/{counts['failed']}"]


def render(rows: list[list[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    widths = [max(len(x) for x in col) for col in zip(HEAD, *rows, strict=True)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [HEAD, *rows])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("projects", nargs="*", help="projects (default: every built-in and user manifest)")
    ap.add_argument("--record", type=Path, help="build times kept per image tag (JSON)")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table (for docs/benchmarks.md)")
    args = ap.parse_args()
    settings = load_settings()
    client = dockerlib.docker_client()
    record = args.record or dockerlib.images_dir(settings) / "build-times.json"
    times = json.loads(record.read_text()) if record.is_file() else {}
    names = args.projects or sorted(m.name for m in known_manifests(settings)[0])
    rows = []
    for name in names:
        rows.append(row(name, settings, client, times))
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(json.dumps(times, indent=1, sort_keys=True))
        print("  ".join(rows[-1]), flush=True)
    print()
    print(render(rows, args.markdown))


if __name__ == "__main__":
    main()
