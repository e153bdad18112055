"""Import CoderEval's released results as a coderun run, with CoderEval's own verdicts.

This is the one place where recorded verdicts are used: the run is someone else's, marked
`kind: imported` in its metadata, and nothing is executed. Input: the JSON lines of
`results-<model>-<prompt>.jsonl` (`_id`, `project`, `file_path`, `name`, `level`,
`generate_results[].{generate_code, is_pass, return_code}`); values that arrive as JSON or Python literals
inside strings are decoded. Optional `--dataset`: CoderEval4Python.json (`{"RECORDS": [...]}` or JSON lines),
whose `oracle_context` gives Acc@k; without it Acc@k is reported as unavailable.

Failure classes: a failing sample that coderun's splicer cannot use (it does not parse, or defines no
function of the task's name) is `syntax` (with its secondary); for any other failing sample CoderEval
recorded only a return code, so it is `other`.
"""

from __future__ import annotations

import ast
import hashlib
import json
import warnings
from pathlib import Path
from typing import Any

from coderun.errors import UsageError
from coderun.evaluation.store import (
    ImportConfig,
    Result,
    RunInfo,
    RunKind,
    RunSample,
    RunStore,
    RunTask,
    code_hash,
)
from coderun.events import Counted, Listener, silent
from coderun.records import ContextSet, Level, VerdictKind
from coderun.runner.splice import SampleSyntaxError, SpliceErrorKind, prepare_sample
from coderun.runner.taxonomy import FailureClass, Primary, classify_syntax


def _decode(value: Any) -> Any:
    """A field that may be JSON or a Python literal inside a string."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text or text[0] not in "[{\"'" and text not in ("True", "False", "true", "false"):
        return value
    for parse in (json.loads, ast.literal_eval):
        try:
            return parse(text)
        except (ValueError, SyntaxError):
            continue
    return value


def _as_bool(value: Any, where: str) -> bool:
    value = _decode(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise UsageError(f"{where}: is_pass must be true or false, got {value!r}")


def read_results(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise UsageError(f"{path}: no such results file")
    records = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise UsageError(f"{path}:{lineno}: not a JSON object ({e.msg})") from None
        missing = [k for k in ("_id", "project", "level", "generate_results") if k not in rec]
        if missing:
            raise UsageError(f"{path}:{lineno}: missing {', '.join(missing)}",
                             hint="expected CoderEval's results format (_id, project, file_path, name, level, "
                                  "generate_results[].generate_code/is_pass)")
        records.append(rec)
    if not records:
        raise UsageError(f"{path}: no records")
    return records


def read_oracle_contexts(path: Path) -> dict[str, ContextSet]:
    """_id -> oracle_context from CoderEval4Python.json."""
    if not path.is_file():
        raise UsageError(f"{path}: no such dataset file")
    text = path.read_text(encoding="utf-8")
    try:
        doc = json.loads(text)
        records = doc["RECORDS"] if isinstance(doc, dict) else doc
    except json.JSONDecodeError:
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
    out = {}
    for rec in records:
        ctx = _decode(rec.get("oracle_context"))
        if not isinstance(ctx, dict):
            continue
        out[str(rec["_id"])] = ContextSet(**{kind: _names(_decode(ctx.get(kind, []))) for kind in ("classes", "apis", "vars")})
    if not out:
        raise UsageError(f"{path}: no record with an oracle_context", hint="expected CoderEval4Python.json")
    return out


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [v.strip(" '\"") for v in value.strip("[]").split(",")]
    return [str(v) for v in value or [] if str(v).strip()]


def _failure(code: str, name: str) -> FailureClass:
    """`syntax` when coderun's own splicer could not use the sample (the same extraction as `eval`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")       # invalid escape sequences in samples
        try:
            prepare_sample(code, name)
        except SampleSyntaxError as e:
            if e.kind is SpliceErrorKind.SYNTAX:
                return classify_syntax(e.message)
            return FailureClass(Primary.SYNTAX, None, e.message)
    return FailureClass(Primary.OTHER, None, "imported verdict: CoderEval recorded a failure")


def import_results(results: Path, run_dir: Path, dataset: Path | None = None, *,
                   on_event: Listener = silent) -> RunStore:
    records = read_results(results)
    contexts = read_oracle_contexts(dataset) if dataset else {}
    digest = hashlib.sha256(results.read_bytes()).hexdigest()
    info = RunInfo(run_id=run_dir.name, kind=RunKind.IMPORTED, label=results.stem, source=str(results.resolve()),
                   config=ImportConfig(importer="codereval", results_sha256=digest,
                                       dataset=str(dataset.resolve()) if dataset else None,
                                       verdicts="CoderEval's recorded is_pass (not re-run by coderun)"))
    store = RunStore.create(run_dir, info)
    tasks, samples, out = [], [], []
    for lineno, rec in enumerate(records, 1):
        task_id = str(rec["_id"])
        tasks.append(RunTask(task_id=task_id, project=str(rec["project"]), level=Level.parse(str(rec["level"])),
                             file=str(rec.get("file_path", "")), name=str(rec.get("name", "")),
                             aliases=[f"{rec['project']}/{rec.get('file_path', '')}::{rec.get('name', '')}"],
                             oracle_context=contexts.get(task_id) if dataset else None))
        for i, gen in enumerate(_decode(rec["generate_results"])):
            gen = _decode(gen)
            code = str(gen.get("generate_code", ""))
            ok = _as_bool(gen.get("is_pass"), f"{results}:{lineno} sample {i}")
            samples.append(RunSample(task_id=task_id, index=i, code=code, hash=code_hash(code),
                                     metadata={"return_code": _decode(gen.get("return_code"))}))
            cls = None if ok else _failure(code, str(rec.get("name") or ""))
            out.append(Result(task_id=task_id, index=i, verdict=VerdictKind.PASS if ok else VerdictKind.FAIL,
                              failure=cls.label if cls else None,
                              reason=f"imported: CoderEval is_pass={ok}, return_code={gen.get('return_code')}"
                              + (f"; {cls.detail}" if cls and cls.primary is Primary.SYNTAX else "")))
        on_event(Counted("importing", lineno, len(records), "records"))
    store.add_tasks(tasks)
    store.add_samples(samples)
    store.record_results(out)
    return store
