"""`coderun images`: build, list and prune the Docker images coderun makes (see coderun/envs/docker.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import docker.errors
import typer
from rich.markup import escape

from coderun.cli._common import (
    REGISTRY_DEFAULT,
    JsonOption,
    ProjectsDirOption,
    build_each,
    console,
    err_console,
    print_json,
    settings,
    with_registry,
)
from coderun.cli.render import Renderer
from coderun.envs import dockerlib
from coderun.envs.base_image import BaseStrategy, build_base_image
from coderun.errors import UsageError
from coderun.events import silent
from coderun.manifests.schema import find_manifest
from coderun.report.terminal import table_or_stacked

app = typer.Typer(no_args_is_help=True, help="Docker images: one per project, built offline, layered.")

BaseOption = typer.Option(None, "--base", help="Base image strategy: pull (python:X.Y-slim from a "
                          "registry) or rootfs (debootstrap, no registry). Default: pull if that image "
                          "is already in the engine, else rootfs.")


def _strategy(base: str | None) -> BaseStrategy | None:
    if base is None:
        return None
    try:
        return BaseStrategy(base)
    except ValueError:
        raise UsageError(f"unknown base strategy {base!r}; use pull or rootfs") from None


@app.command("build")
def build(projects: list[str] = typer.Argument(None, help="Project names or manifest paths; none: only "
                                                "the base image for --python."),
          base: str = BaseOption,
          python: str = typer.Option(f"{sys.version_info[0]}.{sys.version_info[1]}", "--python",
                                     help="Python version of the base image when no project is given."),
          force: bool = typer.Option(False, "--force", help="Rebuild the project layers even when cached."),
          projects_dir: list[Path] = ProjectsDirOption, as_json: bool = JsonOption) -> None:
    """Build the base image, or each project's image with its baseline test run."""
    s = settings(projects_dir)
    strategy = _strategy(base)
    client = dockerlib.docker_client()
    if not projects:
        with Renderer(err_console) as show:
            image = build_base_image(python, s, strategy=strategy, client=client, on_event=show)
        row = {"tag": image.tag, "python": image.python, "strategy": image.strategy.value,
               "built": image.built}
        print_json(row) if as_json else console.print(
            f"[bold]base[/] Python {python} ({image.strategy.value}) → {image.tag}"
            + ("" if image.built else " (cached)"))
        return
    from coderun.envs.docker import build_project_image

    manifests = [find_manifest(p, s) for p in projects]
    rows = []
    def build(m):
        with Renderer(err_console) as show:
            return build_project_image(m, s, strategy, force=force, client=client, on_event=show)

    try:
        for m, image in build_each(manifests, build, "images"):
            counts = image.baseline.counts()
            rows.append({"project": m.name, "tag": image.tag, "python": image.python, "commit": image.commit,
                         "built": list(image.built), **counts})
            if not as_json:
                console.print(f"[bold]{m.name}[/] → {image.tag} "
                              f"({'built: ' + ', '.join(image.built) if image.built else 'cached'}); baseline: "
                              f"{counts['passed']} passed, {counts['failed']} failed, {counts['error']} errors, "
                              f"{counts['skipped']} skipped")
    finally:
        if as_json and (rows or len(manifests) > 1):  # a lone failure is just its error
            print_json(rows)


RegistryOption = typer.Option(None, "--registry", help=f"The registry, HOST\\[:PORT]\\[/PATH] ({REGISTRY_DEFAULT}).")


def _registry(value: str | None, s) -> str:
    s = with_registry(s, value)
    if not s.registry:
        raise UsageError("no registry given", hint="pass --registry HOST[:PORT][/PATH] or set CODERUN_REGISTRY")
    return s.registry


def _each(projects: list[str], registry: str | None, projects_dir: list[Path], as_json: bool, act, row, line) -> None:
    """`act(manifest, settings, registry, client)` for each project; a `row` of each result, printed as JSON
    or as a `line` each."""
    s = settings(projects_dir)
    where = _registry(registry, s)
    client = dockerlib.docker_client()
    rows = []
    try:
        for m, result in build_each([find_manifest(p, s) for p in projects],
                                    lambda m: _shown(act, m, s, where, client, as_json), "images"):
            rows.append({"project": m.name, **row(result, where)})
            if not as_json:
                console.print(f"[bold]{m.name}[/] → {line(rows[-1])}")
    finally:
        if as_json and rows:
            print_json(rows)


def _shown(act, m, s, where: str, client, as_json: bool):
    """`act` with its steps shown on stderr; with --json, none (the rows alone, as before)."""
    with Renderer(err_console) as show:
        return act(m, s, where, client=client, on_event=silent if as_json else show)


@app.command("push")
def push(projects: list[str] = typer.Argument(..., help="Project names or manifest paths."),
         registry: str = RegistryOption, projects_dir: list[Path] = ProjectsDirOption,
         as_json: bool = JsonOption) -> None:
    """Push each project's current image (built here) to a registry, by its content tag."""
    from coderun.envs.docker import push_project_image
    from coderun.envs.registry import remote_ref

    _each(projects, registry, projects_dir, as_json, push_project_image,
          lambda done, where: {"tag": done[0].tag, "remote": remote_ref(where, done[0].tag), "digest": done[1]},
          lambda r: f"{escape(r['remote'])} ({r['digest'][:19]})")


@app.command("pull")
def pull(projects: list[str] = typer.Argument(..., help="Project names or manifest paths."),
         registry: str = RegistryOption, projects_dir: list[Path] = ProjectsDirOption,
         as_json: bool = JsonOption) -> None:
    """Pull each project's current image from a registry by its content tag (its baseline comes with it)."""
    from coderun.envs.docker import pull_project_image

    _each(projects, registry, projects_dir, as_json, pull_project_image,
          lambda image, where: {"tag": image.tag, "pulled": image.pulled_from is not None,
                                **image.baseline.counts()},
          lambda r: f"{r['tag']} ({'pulled' if r['pulled'] else 'already here'}); baseline: {r['passed']} "
                    f"passed, {r['failed']} failed, {r['error']} errors, {r['skipped']} skipped")


def _coderun_images(client) -> list[dict]:
    rows = []
    for image in client.images.list(filters={"label": f"{dockerlib.LABEL_PREFIX}.layer"}):
        lab = {k.removeprefix(f"{dockerlib.LABEL_PREFIX}."): v for k, v in (image.labels or {}).items()}
        get = lambda k, lab=lab: lab.get(k, "")  # noqa: E731
        rows.append({"id": image.short_id.split(":")[-1], "tags": list(image.tags), "layer": get("layer"),
                     "project": get("project"), "python": get("python") or get("suite"),
                     "strategy": get("strategy"), "size_mb": round(image.attrs["Size"] / 1e6, 1),
                     "created": image.attrs["Created"][:19].replace("T", " ")})
    order = {layer: i for i, layer in enumerate(dockerlib.LAYERS)}
    rows.sort(key=lambda r: (r["project"], order.get(r["layer"], 9), r["created"]))
    return rows


@app.command("list")
def list_images(as_json: bool = JsonOption) -> None:
    """List the images coderun built (every layer), with sizes."""
    rows = _coderun_images(dockerlib.docker_client())
    if as_json:
        print_json(rows)
        return
    console.print(table_or_stacked(["layer", "project", "python", "size MB", "created (UTC)"],
                                   [[r["layer"], r["project"], r["python"], f"{r['size_mb']:.1f}", r["created"][:16]]
                                    for r in rows],
                                   "image", [escape(", ".join(r["tags"]) or f"<untagged {r['id']}>") for r in rows],
                                   left=(0, 1, 2, 4)))


def _superseded(rows: list[dict]) -> list[dict]:
    """Untagged images, and in each (layer, project, python, strategy) group all but the newest."""
    newest: dict[tuple, dict] = {}
    out = [r for r in rows if not r["tags"]]
    for r in sorted((r for r in rows if r["tags"]), key=lambda r: r["created"], reverse=True):
        group = (r["layer"], r["project"], r["python"], r["strategy"])
        if group in newest:
            out.append(r)
        else:
            newest[group] = r
    return out


@app.command("prune")
def prune(all_images: bool = typer.Option(False, "--all", help="Remove every coderun image, not only "
                                          "superseded ones."),
          dry_run: bool = typer.Option(False, "--dry-run", help="Only say what would be removed."),
          as_json: bool = JsonOption) -> None:
    """Remove superseded coderun images (older builds of the same layer and project), or all of them."""
    client = dockerlib.docker_client()
    rows = _coderun_images(client)
    doomed = rows if all_images else _superseded(rows)
    # Children before parents: project, source, deps, base, rootfs.
    order = {layer: i for i, layer in enumerate(reversed(dockerlib.LAYERS))}
    doomed.sort(key=lambda r: order.get(r["layer"], -1))
    removed, kept = [], []
    for r in doomed:
        names = r["tags"] or [r["id"]]
        if dry_run:
            removed += names
            continue
        for name in names:
            try:
                client.images.remove(name)
                removed.append(name)
            except docker.errors.APIError as e:  # e.g. a child image still uses it
                kept.append({"image": name, "reason": str(e.explanation)})
    if as_json:
        print_json({"removed": removed, "kept": kept, "dry_run": dry_run})
        return
    verb = "would remove" if dry_run else "removed"
    console.print(f"{verb} {len(removed)} image(s)" + (":" if removed else ""))
    for name in removed:
        console.print(f"  {name}")
    for k in kept:
        err_console.print(f"[yellow]kept {k['image']}:[/] {k['reason']}")
