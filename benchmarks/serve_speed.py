"""Verdict service speed: `coderun serve` under a bounded load on loopback, against `coderun eval` on the same
samples in the same run.

    python benchmarks/serve_speed.py [--project cachetools] [--clients 8] [--slots 2] [--backend local]
                                     [--repeat 1] [--data DIR]

Samples: CoderEval's released CodeGen samples (raw and human-label prompts) of the project's built tasks,
`coderun tasks build <project>` makes them: a few hundred requests. Each repetition runs, in this order:
`coderun eval` on them in-process (the workers executor, `--slots` jobs), then a fresh server (`coderun serve`
in a subprocess, its own empty store, `--slots` slots) that `--clients` concurrent clients send every sample to
once, each as one POST /v1/verdicts awaited before the next. Printed: the machine's load (`uptime`), samples,
unique samples, wall time and samples per second of each, the service's throughput as a share of eval's (the
target is 90% or more), per-request latency p50 / p99, and whether every verdict agreed with eval's. The
server is ready (its /healthz answers) before it is timed; its workers start on the first requests, as eval's
do inside its wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from coderun.config import load_settings
from coderun.evaluation.evaluate import EvalRequest, execute, start_run
from coderun.evaluation.samples import read_samples, resolver_from_tasks
from coderun.evaluation.store import RunStore
from coderun.serve.client import AsyncVerdictClient
from coderun.tasks import load_tasks

from _data import add_data_option, codereval_data

FILES = ("results-CodeGen-raw.jsonl", "results-CodeGen-humanlabel.jsonl")


def samples_of(data: Path, tasks: list) -> list[tuple[str, str]]:
    """(task id, code) of every CodeGen sample of the tasks, from each released file, in file order."""
    out = []
    for name in FILES:
        out += [(s.task_id, s.code) for s in read_samples(data / name, resolver_from_tasks(tasks)).samples
                if s.task_id in {t.task_id for t in tasks}]
    return out


def run_eval(settings, tasks, samples: list[tuple[str, str]], backend: str, slots: int, work: Path):
    path = work / "samples.jsonl"
    path.write_text("".join(json.dumps({"task_id": t, "solution": c}) + "\n" for t, c in samples))
    req = EvalRequest(samples=path, backend=backend, jobs=slots, run_dir=work / "eval", label="serve_speed")
    t0 = time.perf_counter()
    store, _ = start_run(req, settings, tasks)
    execute(store, settings)
    wall = time.perf_counter() - t0
    with RunStore.open(work / "eval") as st:
        codes = {(s.task_id, s.index): s.code for s in st.samples()}
        verdicts = {(r.task_id, codes[(r.task_id, r.index)]): (r.verdict.value, r.failure) for r in st.results()}
    return wall, verdicts


def start_server(project: str, backend: str, slots: int, state: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (state.parent / "server.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "coderun", "serve", project, "--backend", backend, "-j",
                             str(slots), "--port", str(port), "--state", str(state), "--queue", "1024"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, "CODERUN_SERVE_TOKEN": ""})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the server exited; see {state.parent / 'server.log'}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.3)
    sys.exit("the server did not answer in 600 s")


async def load(url: str, samples: list[tuple[str, str]], clients: int) -> tuple[float, list[float], dict]:
    """`clients` workers taking the next sample from a shared list until none is left; (wall, latencies,
    verdicts)."""
    todo = list(enumerate(samples))
    latencies: list[float] = []
    verdicts: dict = {}

    async def client_loop(client: AsyncVerdictClient) -> None:
        while todo:
            _, (task_id, code) = todo.pop(0)
            t0 = time.perf_counter()
            v = await client.verdict(task_id, code=code)
            latencies.append(time.perf_counter() - t0)
            verdicts[(task_id, code)] = (v.verdict.value if v.verdict else None, v.failure)

    t0 = time.perf_counter()
    async with AsyncVerdictClient(url) as client:
        await asyncio.gather(*(client_loop(client) for _ in range(clients)))
    return time.perf_counter() - t0, latencies, verdicts


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--project", default="cachetools")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--backend", choices=["local", "docker"], default="local")
    ap.add_argument("--repeat", type=int, default=1)
    add_data_option(ap)
    args = ap.parse_args()
    data = codereval_data(args.data, *FILES)
    settings = load_settings()
    tasks = [t for t in load_tasks(settings, project=args.project) if t.aliases]
    if not tasks:
        sys.exit(f"no built task of {args.project} with a CoderEval alias: coderun tasks build {args.project}")
    samples = samples_of(data, tasks)
    unique = len({(t, " ".join(c.split())) for t, c in samples})
    print(f"{args.project}: {len(samples)} samples ({unique} unique), {args.clients} clients, {args.slots} slots, "
          f"{args.backend} backend")
    for rep in range(1, args.repeat + 1):
        with tempfile.TemporaryDirectory(prefix="coderun-serve-speed-") as tmp:
            work = Path(tmp)
            print(f"[{rep}] before: {uptime()}")
            eval_wall, reference = run_eval(settings, tasks, samples, args.backend, args.slots, work)
            proc, url = start_server(args.project, args.backend, args.slots, work / "state")
            try:
                wall, latencies, got = asyncio.run(load(url, samples, args.clients))
            finally:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=60)
            differ = [k for k in reference if got.get(k) != reference[k]]
            print(f"[{rep}] after:  {uptime()}")
            print(f"[{rep}] eval:  {eval_wall:7.1f} s  {len(samples) / eval_wall:6.2f} samples/s")
            print(f"[{rep}] serve: {wall:7.1f} s  {len(samples) / wall:6.2f} samples/s  "
                  f"({eval_wall / wall:.0%} of eval's throughput)  latency p50 {pct(latencies, 0.5):.2f} s  "
                  f"p99 {pct(latencies, 0.99):.2f} s")
            print(f"[{rep}] verdicts: {len(reference) - len(differ)} of {len(reference)} agree with eval's"
                  + (f"; differ: {differ[:3]}" if differ else ""))


if __name__ == "__main__":
    main()
