"""`coderun prompts`: render the stored tasks as prompts for one context variant and docstring choice."""

from __future__ import annotations

from pathlib import Path

import typer

from coderun.cli._common import JsonOption, ProjectsDirOption, err_console, print_json, settings
from coderun.errors import TaskError, UsageError
from coderun.prompts import (
    PromptSpec,
    build_prompts,
    get_tokenizer,
    load_human_docstrings,
    load_templates,
    variant_names,
    write_prompts,
)
from coderun.prompts.checkouts import checkout_resolver
from coderun.tasks import load_tasks


def prompts(
    out: Path = typer.Option(..., "-o", "--out", help="prompts.jsonl to write."),
    context: str = typer.Option("none", "--context", help=f"Context variant: {', '.join(variant_names())}; "
                                "compose with + (e.g. oracle+class)."),
    docstring: str = typer.Option("original", "--docstring", help="original or human."),
    project: str = typer.Option(None, "--project", help="Only this project's tasks."),
    level: str = typer.Option(None, "--level", help="Only tasks of this runnable level."),
    template: Path = typer.Option(None, "--template", help="YAML file with completion/system/user templates."),
    max_tokens: int = typer.Option(None, "--max-tokens", help="Token budget per prompt (context is cut to fit)."),
    tokenizer: str = typer.Option("auto", "--tokenizer", help="auto, approx or tiktoken:<encoding>."),
    human_docstrings: Path = typer.Option(None, "--human-docstrings", help="CoderEval CEPythonHumanLabel.jsonl-"
                                          "style file (question_id, docstring), matched to task aliases."),
    include_weak: bool = typer.Option(False, "--include-weak", help="Also tasks whose tests are weak."),
    projects_dirs: list[Path] = ProjectsDirOption,
    json_out: bool = JsonOption,
) -> None:
    """Write one prompt per task (completion and chat renderings) for a context variant."""
    spec = PromptSpec(context=context, docstring=docstring, max_tokens=max_tokens,  # type: ignore[arg-type]
                      templates=load_templates(template), tokenizer=get_tokenizer(tokenizer))
    human = load_human_docstrings(human_docstrings) if human_docstrings else None
    s = settings(projects_dirs)
    tasks = load_tasks(s, project=project, level=level, include_weak=include_weak)
    if not tasks:
        raise TaskError("no tasks match" + (f" project {project!r}" if project else "")
                        + (f" level {level!r}" if level else ""),
                        hint="build them with `coderun tasks build PROJECT`; `coderun tasks list` shows them")
    build = build_prompts(tasks, checkout_resolver(s), spec, human)
    for task_id, why in build.skipped:
        err_console.print(f"[yellow]skipped[/] {task_id}: {why}", highlight=False)
    if not build.records:
        raise UsageError(f"none of the {len(tasks)} tasks has a human-labeled docstring",
                         hint="add human_docstring to the manifest targets, or pass --human-docstrings FILE")
    write_prompts(build.records, out)
    cut = sum(1 for r in build.records if r.truncated)
    over = sum(1 for r in build.records if r.over_budget)
    if json_out:
        print_json({"out": str(out), "prompts": len(build.records), "skipped": build.skipped, "truncated": cut,
                    "over_budget": over, "tokenizer": spec.tokenizer.name})
    else:
        err_console.print(f"{len(build.records)} prompts ({context}:{docstring}, tokens counted with "
                          f"{spec.tokenizer.name}; {cut} cut to fit, {over} over budget, "
                          f"{len(build.skipped)} tasks skipped) -> {out}")
