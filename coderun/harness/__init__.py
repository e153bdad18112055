"""Files coderun copies into a sandbox's harness folder and runs there with the project's own interpreter.

They import nothing from coderun (the project's Python may be 3.7 and has none of coderun's dependencies)
and import each other as top-level modules: the harness folder is on sys.path there. Their names all
start with `coderun_`, because that folder is also on the PYTHONPATH of the tests they run, ahead of the
project's import root: a plain name (`protocol`) would shadow a project module of that name.
The host imports them too, for their constants, messages (coderun_protocol) and the stream buffer
(coderun_capped): they are leaves, so every stage may.
"""

from pathlib import Path

HARNESS_DIR = Path(__file__).parent

# The reporter (a pytest plugin, loaded with `-p coderun_reporter`) and what it imports: every executor's.
REPORTER_FILES = ("coderun_reporter.py", "coderun_integrity.py", "coderun_testcode.py", "coderun_values.py",
                  "coderun_differential.py", "coderun_mutants.py")

# Whole-suite runs of the original (the baseline, the coverage run): the per-test limit (a pytest plugin,
# `-p coderun_limit`) and the baseline's runner, which runs the suite again without a test that ended it.
LIMIT_FILES = ("coderun_limit.py", "coderun_baseline.py")

# The recorder (a pytest plugin, `-p coderun_recorder`), run by the task build in the project's venv, never in a
# sandbox: what it imports.
RECORDER_FILES = ("coderun_recorder.py", "coderun_values.py")

# What the worker needs in the sandbox's harness folder besides the reporter (coderun_worker.py runs there).
WORKER_FILES = (
    "coderun_worker.py",      # the worker process (its entry point)
    "coderun_protocol.py",    # the messages on its pipes
    "coderun_hashes.py",      # the file hasher (the naive path runs its text too)
    "coderun_capped.py",      # head and tail of a stream (the host's sandboxes use it too)
    "coderun_folders.py",     # the sample folder: snapshot, put back after a sample
    "coderun_statements.py",  # pytest's statement ranges, kept per file text
    "coderun_pytest_run.py",  # `python -m pytest` inside a running interpreter
    "coderun_child.py",       # the process of one sample
    "coderun_children.py",    # the worker's side of a child: fork, watch, kill what it left
    "coderun_priming.py",     # what is done once so that every child finds it done
    "coderun_template.py",    # pytest configured once per task
)
