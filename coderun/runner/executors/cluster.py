"""The cluster executor: the workers executor spread over the nodes of a Ray cluster.

On each node, a Ray actor per (project, slot) holds coderun's in-sandbox worker for that project (a
WorkerPool of one slot), so a node pays a project's start-up once. The driver keeps one thread per slot of
the cluster (its CPUs), each lending itself an actor of the unit's project; the run store stays on the driver,
the only writer, and each result is committed as it comes back (keyed by task and sample, so a unit run twice
is recorded once).

An actor builds or finds the project's environment on its node by content hash (the same manifest gives the
same environment and image tag everywhere); on one machine or a shared CODERUN_HOME, it is the driver's.
With a registry (`--registry`, CODERUN_REGISTRY), a docker node pulls the driver's image by its tag first.
When an actor is lost with its node, the unit it was running is re-run on another actor, visibly (`notes`),
at most MAX_ATTEMPTS times; then the sample is recorded as infrastructure (`SandboxError`).

Ray is an optional extra: `pip install 'coderun[ray]'`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import tempfile
import threading
from dataclasses import replace
from pathlib import Path

from coderun.errors import SandboxError, UsageError
from coderun.records import Evidence
from coderun.runner.evidence import SampleRun
from coderun.sandbox import SandboxSpec

MAX_ATTEMPTS = 3          # runs of one unit on lost actors before it is recorded as infrastructure
NO_CPU_TIMEOUT = 600.0    # seconds a unit waits for a CPU of the cluster (all nodes lost) before infra
INSTALL_HINT = "install the extra: pip install 'coderun[ray]'"


def parse_cluster(spec: str) -> dict[str, object]:
    """`ray.init` arguments for a --cluster value: `ray` (RAY_ADDRESS, else a local Ray instance), `auto` (a
    running cluster), `ray://HOST:PORT` (Ray Client) or `HOST:PORT` (the cluster's GCS address)."""
    spec = spec.strip()
    if spec == "ray":
        return {}
    if spec == "auto" or spec.startswith("ray://"):
        return {"address": spec}
    host, _, port = spec.rpartition(":")
    if host and port.isdigit():
        return {"address": spec}
    raise UsageError(f"unknown cluster {spec!r}: give ray, auto, ray://HOST:PORT or the HOST:PORT of a running "
                     "Ray cluster")


def require_ray():
    """The ray module; a UsageError saying how to install it when it is missing."""
    try:
        import ray
    except ImportError:
        raise UsageError("--cluster needs Ray, which is not installed", hint=INSTALL_HINT) from None
    return ray


class ProjectWorker:
    """The actor: one project's worker on one node (made a Ray actor class by ClusterPool)."""

    def __init__(self, backend: str, spec: SandboxSpec, manifest: object | None, registry: str | None = None):
        from coderun.runner.executors.workers import WorkerPool
        from coderun.sandbox.project import usable_here

        if not usable_here(spec, backend) and not (registry and _pulled(spec, backend, registry)):
            spec = _spec_on_this_node(manifest, backend, spec)  # the driver's registry was tried above
        self.pool = WorkerPool(backend, {spec.project: spec}, 1)
        self.node = os.uname().nodename

    def run(self, project: str, run: SampleRun) -> tuple[Evidence, str | None, list[str]]:
        """The evidence, the log's text (written here on the node, sent to the driver) and new notes."""
        with tempfile.TemporaryDirectory(prefix="coderun-ray-") as tmp:
            log = Path(tmp) / "sample.log"
            seen = len(self.pool.notes)
            evidence = self.pool.run(project, replace(run, log_path=log))
            text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else None
            return evidence, text, self.pool.notes[seen:]

    def close(self) -> None:
        self.pool.__exit__(None, None, None)


def _pulled(spec: SandboxSpec, backend: str, registry: str) -> bool:
    """The driver's environment pulled by its tag from the registry (no source or build needed on this node)."""
    from coderun.sandbox.project import pull_environment

    try:
        return pull_environment(spec, backend, registry)
    except SandboxError as e:
        print(f"{spec.project}: {e.message}; building {spec.image} on this node instead", file=sys.stderr, flush=True)
        return False


def _spec_on_this_node(manifest, backend: str, driver_spec: SandboxSpec) -> SandboxSpec:
    """Build or find the project's environment on this node by its content hash (the same manifest gives
    the same environment and image tag here as on the driver)."""
    from coderun.config import load_settings
    from coderun.sandbox.project import project_sandbox_spec

    if manifest is None:
        raise SandboxError(f"{driver_spec.project}: its environment is not on this node and no manifest came")
    return replace(project_sandbox_spec(manifest, load_settings(), backend), limits=driver_spec.limits,
                   run_id=driver_spec.run_id)


class ClusterPool:
    """The executor's pool: `run(project, SampleRun) -> Evidence`, on actors across the cluster."""

    name = "cluster"

    def __init__(self, backend: str, specs: dict[str, SandboxSpec], jobs: int, *, cluster: str,
                 manifests: dict[str, object] | None = None, registry: str | None = None):
        self.backend, self.specs, self.manifests = str(backend), specs, manifests or {}
        self.registry = registry
        self.init_args = parse_cluster(cluster)
        self.notes: list[str] = []
        self.slots = jobs
        self._idle: list[tuple[str, object]] = []   # (project, actor) least recently used first
        self._count = 0                              # live actors
        self._slots = itertools.count()              # each actor's sandbox gets a slot of its own
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._ray = None
        self._started_ray = False

    def __enter__(self) -> ClusterPool:
        ray = self._ray = require_ray()
        if not ray.is_initialized():
            ray.init(**self.init_args, include_dashboard=False, log_to_driver=False, configure_logging=False)
            self._started_ray = True
        self.slots = max(1, int(ray.cluster_resources().get("CPU", 0)) or self.slots)
        self._actor_class = ray.remote(num_cpus=1, max_restarts=0, max_concurrency=1)(ProjectWorker)
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            actors = [a for _, a in self._idle]
            self._idle.clear()
        for actor in actors:
            with contextlib.suppress(Exception):
                self._ray.get(actor.close.remote(), timeout=60)
            with contextlib.suppress(Exception):
                self._ray.kill(actor)
        if self._started_ray:
            with contextlib.suppress(Exception):
                self._ray.shutdown()

    def run(self, project: str, run: SampleRun) -> Evidence:
        lost = []
        for _ in range(MAX_ATTEMPTS):
            actor = self._lend(project)
            try:
                evidence, log, notes = self._ray.get(actor.run.remote(project, run))
            except self._ray.exceptions.RayTaskError as e:  # raised inside the actor: the sandbox's error
                self._give_back(project, actor)
                raise SandboxError(f"{project}: {e.cause if getattr(e, 'cause', None) else e}") from None
            except self._ray.exceptions.RayError as e:  # the actor (its node, its process) is gone
                lost.append(type(e).__name__)
                self._forget(actor)
                note = (f"{project}: {run.relfile}: the actor running it was lost ({type(e).__name__}, its node "
                        "or process died); re-run on another actor")
                print(note, file=sys.stderr, flush=True)
                with self._lock:
                    self.notes.append(note)
                continue
            self._give_back(project, actor)
            with self._lock:
                self.notes += notes
            if log is not None and run.log_path is not None:
                rerun = "".join(f"coderun: re-run: an actor running this sample was lost ({why})\n" for why in lost)
                run.log_path.write_text(rerun + log, encoding="utf-8")
            return evidence.model_copy(update={"log_path": str(run.log_path) if run.log_path else None})
        raise SandboxError(f"{project}: lost the actor {MAX_ATTEMPTS} times ({', '.join(lost)})")

    def _lend(self, project: str):
        """An idle actor of the project, else a new one while the live nodes have a CPU for it; else an idle
        actor of another project is ended first (an actor holds its CPU while it lives); else wait for an
        actor to come back. The capacity is read again each time, so a lost node's CPUs are not counted."""
        waited = 0.0
        with self._cond:
            while True:
                for i, (p, _) in enumerate(self._idle):
                    if p == project:
                        return self._idle.pop(i)[1]
                if self._count < self._capacity():
                    break
                if self._idle:
                    _, old = self._idle.pop(0)
                    self._count -= 1
                    with contextlib.suppress(Exception):  # after its sandbox is closed, in its queue's order
                        old.close.remote()
                        old.__ray_terminate__.remote()
                    continue
                if waited >= NO_CPU_TIMEOUT:
                    raise SandboxError(f"{project}: no CPU of the cluster came free in {NO_CPU_TIMEOUT:g} s")
                self._cond.wait(timeout=5.0)
                waited += 5.0
            self._count += 1
            spec = replace(self.specs[project], slot=next(self._slots))
        memory = max(1, spec.limits.memory_mb) * 2**20 if spec.limits and spec.limits.memory_mb else None
        options = {"memory": memory} if memory else {}
        return self._actor_class.options(**options).remote(self.backend, spec, self.manifests.get(project),
                                                           self.registry)

    def _capacity(self) -> int:
        """CPUs of the nodes alive now."""
        try:
            return int(self._ray.cluster_resources().get("CPU", 0))
        except Exception:  # noqa: BLE001  (the GCS briefly unreachable: keep the last figure)
            return self.slots

    def _give_back(self, project: str, actor) -> None:
        with self._cond:
            self._idle.append((project, actor))
            self._cond.notify_all()

    def _forget(self, actor) -> None:
        """A lost actor: its sandbox went with it (the guardian ends what a killed owner leaves)."""
        with self._cond:
            self._count -= 1
            self._cond.notify_all()
        with contextlib.suppress(Exception):
            self._ray.kill(actor, no_restart=True)
