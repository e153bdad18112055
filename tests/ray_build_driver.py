"""Run `coderun tasks build --cluster` on a multi-node Ray cluster simulated on this machine; print JSON of it.

    python tests/ray_build_driver.py --nodes N --nodes-home HOME --out DIR [--timeout S] -- BUILD_ARGS...

Meant to run inside a loopback-only network namespace (tests/ray_namespace.py). The nodes (a
`ray.cluster_utils.Cluster` of N one-CPU nodes on 127.0.0.1, tests/ray_cluster_driver.py) are started with
CODERUN_HOME=HOME, so their builds use HOME's environments and store; then `python -m coderun tasks build
BUILD_ARGS --cluster ADDRESS` runs with this process's own CODERUN_HOME (the driver's), stdout and stderr in
DIR. The JSON on stdout: the cluster's address and the build's argv, exit code, seconds and output files.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from ray_cluster_driver import Eval, start_cluster


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--nodes-home", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("build_args", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    build_args = [a for a in args.build_args if a != "--"]
    args.out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.timeout
    driver_home = os.environ.get("CODERUN_HOME")
    os.environ["CODERUN_HOME"] = str(args.nodes_home)  # the raylets, and so their workers, inherit it
    cluster, _ = start_cluster(args.nodes)
    if driver_home is None:
        del os.environ["CODERUN_HOME"]
    else:
        os.environ["CODERUN_HOME"] = driver_home
    report: dict = {"address": cluster.address, "nodes": args.nodes}
    try:
        build = Eval("build", [sys.executable, "-m", "coderun", "tasks", "build", *build_args, "--cluster",
                               cluster.address], args.out)
        build.wait(deadline)
        report["build"] = build.record()
    finally:
        cluster.shutdown()
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
