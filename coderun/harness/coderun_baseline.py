"""Run a project's whole test suite once on the original code (the baseline) so that no test can stall it.
Standalone (stdlib only, Python 3.6, as the oldest projects' baselines need): run by the project's interpreter,
on the host or in an image.

    python coderun_baseline.py OUT_DIR TIMEOUT -- python -m pytest -p coderun_limit ...

The command runs with CODERUN_LIMIT_LOG=OUT_DIR/limit.log (see coderun_limit), at most TIMEOUT seconds. When
a test ended the whole process (hung past the alarm, or crashed it), the command runs again with that test
deselected, up to a few times; OUT_DIR/ended.json lists those tests. The exit code is the last run's (124 when
it ran out of time). Every run's output goes to this process's stdout.
"""

import json
import os
import subprocess
import sys

ATTEMPTS = 5


def unfinished(log: str) -> "tuple[bool, str | None]":
    """(the session finished, the test that began and did not end) from a limit log."""
    begun, finished = None, False
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            for line in f:
                kind, _, rest = line.rstrip("\n").partition("\t")
                if kind == "begin":
                    begun = rest
                elif kind == "end" and rest.split("\t")[0] == begun:
                    begun = None
                elif kind == "finish":
                    finished = True
    except OSError:
        pass
    return finished, begun


def main(argv: "list[str]") -> int:
    out, timeout, cmd = argv[1], float(argv[2]), argv[4:]
    log = os.path.join(out, "limit.log")
    ended = []  # type: list[str]
    code = 0
    for _ in range(ATTEMPTS):
        if os.path.exists(log):
            os.remove(log)
        deselect = [a for n in ended for a in ("--deselect", n)]
        try:
            code = subprocess.run(cmd + deselect, env=dict(os.environ, CODERUN_LIMIT_LOG=log), timeout=timeout,
                                  stdin=subprocess.DEVNULL).returncode
        except subprocess.TimeoutExpired:
            code = 124
        finished, test = unfinished(log)
        if finished or test is None or test in ended or code == 124:
            break
        ended.append(test)
        print(f"coderun: {test} ended the test process (exit {code}) before it finished; running the suite "
              "again without it", flush=True)
    with open(os.path.join(out, "ended.json"), "w", encoding="utf-8") as f:
        json.dump(ended, f)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
