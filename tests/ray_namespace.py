"""Run a Python script inside a network namespace of its own with only loopback (issue 22).

Ray binds to and connects through the machine's external address unless that address does not exist, so the
cluster tests start their Ray cluster in `unshare --net` (we are root), bring up `lo` and nothing else: every
connection Ray and coderun make stays on 127.0.0.1. The filesystem is shared (the Docker socket, the venv,
CODERUN_HOME); Ray's temporary folder is a private one (RAY_TMPDIR), so a cluster here never finds, nor
overwrites the address file of, another Ray instance on the machine.

What Ray 2.60 needs inside such a namespace (checked by hand, tests/ray_cluster_driver.py does this):
`ray.cluster_utils.Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "node_ip_address":
"127.0.0.1", "include_dashboard": False})`, then `cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")`
per extra node. Without `node_ip_address`, Ray looks for its address by connecting to 8.8.8.8:53, fails (no
route), and falls back to resolving the hostname, which gives 127.0.0.1 only where /etc/hosts says so. A driver
started later with `ray.init(address=cluster.address)` needs nothing more: it reads the node's address from
the session folder.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# lo up, and no other link: what the tests rely on (/sys is the host's, so ask `ip`)
PROBE = 'ip link set lo up && test "$(ip -o link show | cut -d: -f2 | tr -d " ")" = lo'


@functools.cache
def unavailable() -> str | None:
    """Why a loopback-only namespace cannot be made here (None when it can)."""
    for tool in ("unshare", "ip"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (util-linux, iproute2)"
    try:
        done = subprocess.run(["unshare", "--net", "--", "sh", "-c", PROBE], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unshare --net failed: {e}"
    if done.returncode != 0:
        return (f"unshare --net is not permitted here (exit {done.returncode}: {done.stderr.strip()[:200]}); "
                "the cluster tests need root or CAP_SYS_ADMIN")
    return None


def ray_missing() -> str | None:
    """Why Ray cannot be used (None when it can)."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return "Ray is not installed: pip install -e '.[ray]'"
    return None


def skip_reason() -> str | None:
    return ray_missing() or unavailable()


def run_isolated(script: Path, *args: str, timeout: float, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`python SCRIPT ARGS` in a new network namespace with only loopback up, with a private RAY_TMPDIR;
    stdout and stderr captured as text. The process group is killed on timeout."""
    ray_tmp = tempfile.mkdtemp(prefix="rt-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    full_env = {**os.environ, "RAY_TMPDIR": ray_tmp, **(env or {})}
    cmd = ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh",
           sys.executable, str(script), *args]
    proc = subprocess.Popen(cmd, env=full_env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        err += f"\nray_namespace: killed after {timeout:.0f} s\n"
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
