"""Prompt variants on a small hand-made project whose expected prompt text is known."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from coderun.errors import UsageError
from coderun.prompts import PromptSpec, build_prompts, load_human_docstrings, load_templates, variant
from coderun.prompts import variants as variants_mod
from coderun.prompts.tokens import APPROX, approx_count, get_tokenizer
from coderun.records import ContextSet, Level, Task
from tests.helpers import CODEREVAL_DATA

FILES = {
    "pkg/__init__.py": "from .util import slugify as slugify\n",
    "pkg/util.py": '''\
        """Helpers."""

        DEFAULT_SEP = "-"


        def slugify(text, sep=DEFAULT_SEP):
            """Turn text into a slug."""
            return sep.join(text.lower().split())
        ''',
    "pkg/shapes.py": '''\
        """Shapes."""

        import math
        from collections import OrderedDict

        from pkg import slugify

        SCALE = 2


        def area_of_circle(r):
            """Area of a circle of radius r."""
            return math.pi * r * r


        class Shape:
            """A named shape."""

            kind = "shape"

            def __init__(self, name):
                self.name = name
                self._cache = OrderedDict()

            def label(self):
                """A slug of the name."""
                return slugify(self.name)

            @staticmethod
            def describe(shape,
                         prefix=""):
                """Describe the shape with its label and kind.

                The label is repeated SCALE times.
                """
                text = slugify(prefix) + shape.label() + ":" + Shape.kind
                return text * SCALE

            def label_twice(self, sep=" "):
                """The label, twice, with the circle area of SCALE."""
                area = area_of_circle(SCALE)
                self._cache[sep] = area
                return sep.join([self.label()] * 2) + str(math.floor(area))
        ''',
}

HEADER = '''\
def label_twice(self, sep=" "):
    """The label, twice, with the circle area of SCALE."""
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(textwrap.dedent(text))
    return tmp_path


def _task(name: str = "label_twice", lineno: int = 39, **kw) -> Task:
    fields = dict(
        task_id=f"hp/pkg/shapes.py::Shape.{name}", aliases=["62e60f43d76274f8a4026e28"], project="hp",
        commit="c0ffee", file="pkg/shapes.py", qualname=f"Shape.{name}", name=name, lineno=lineno,
        end_lineno=lineno + 4, class_name="Shape", signature=f'def {name}(self, sep=" "):',
        docstring="The label, twice, with the circle area of SCALE.", source="",
        level=Level.CLASS_RUNNABLE,
        all_context=ContextSet(classes=["OrderedDict", "Shape"], apis=["area_of_circle", "slugify"],
                               vars=["SCALE"]))
    return Task(**{**fields, **kw})


def _prompt(project: Path, context: str, task: Task | None = None, **spec):
    build = build_prompts([task or _task()], lambda t: project, PromptSpec(context=context, **spec))
    assert not build.skipped
    return build.records[0]


def test_none_is_signature_and_docstring_only(project):
    rec = _prompt(project, "none")
    assert rec.prompt == HEADER and rec.header == HEADER
    assert rec.prompt_id == "hp/pkg/shapes.py::Shape.label_twice@none:original"
    assert (rec.variant, rec.level, rec.indent) == ("none:original", "class_runnable", 0)


def test_oracle_shows_exactly_what_the_body_uses(project):
    assert _prompt(project, "oracle").prompt == textwrap.dedent('''\
        # imports the function relies on
        import math

        # members of Shape the function uses
        class Shape:
            # self._cache = OrderedDict()  (instance attribute)
            def label(self):
                """A slug of the name."""
                ...

        # names from pkg/shapes.py the function uses
        SCALE = 2

        def area_of_circle(r):
            """Area of a circle of radius r."""
            ...


        ''') + HEADER


def test_oracle_follows_a_project_import_through_a_reexport(project):
    """`from pkg import slugify` is defined in pkg/util.py, re-exported by pkg/__init__.py."""
    task = _task("describe", lineno=30, signature='def describe(shape, prefix=""):',
                 docstring="Describe the shape.")
    rec = _prompt(project, "oracle", task)
    assert "# from pkg/util.py\ndef slugify(text, sep=DEFAULT_SEP):\n    \"\"\"Turn text into a slug.\"\"\"\n    ...\n" \
        in rec.prompt
    assert "kind = \"shape\"" in rec.prompt                       # Shape.kind, a class attribute
    assert rec.prompt.endswith('@staticmethod\ndef describe(shape,\n             prefix=""):\n'
                               '    """Describe the shape."""\n')
    assert "repeated SCALE times" not in rec.prompt               # the enclosing class is not shown whole


def test_oracle_uses_the_analyzers_oracle_context_too(project):
    task = _task(oracle_context=ContextSet(apis=["slugify"]))
    assert "from pkg import slugify" in _prompt(project, "oracle", task).prompt


def test_class_is_the_skeleton_without_the_target(project):
    assert _prompt(project, "class").prompt == textwrap.dedent('''\
        # the enclosing class Shape (without label_twice)
        class Shape:
            """A named shape."""
            kind = "shape"
            def __init__(self, name):
                ...
            def label(self):
                """A slug of the name."""
                ...
            @staticmethod
            def describe(shape,
                         prefix=""):
                """
                Describe the shape with its label and kind.

                The label is repeated SCALE times.
                """
                ...


        ''') + HEADER


def test_file_is_the_whole_file_without_the_target_docstring_and_body(project):
    prompt = _prompt(project, "file", docstring="original").prompt
    context = prompt[: -len(HEADER)]
    assert context.startswith('# the file pkg/shapes.py\n"""Shapes."""\n\nimport math\n')
    assert '    def label_twice(self, sep=" "):\n        ...  # label_twice: completed below\n' in context
    assert "area = area_of_circle(SCALE)" not in context and "circle area" not in context
    assert "return slugify(self.name)" in context                 # the rest of the file is there


def test_all_lists_the_files_all_context(project):
    assert _prompt(project, "all").prompt == (
        "# names available in pkg/shapes.py\n# classes: OrderedDict, Shape\n# apis: area_of_circle, slugify\n"
        "# vars: SCALE\n\n\n" + HEADER)


def test_variants_compose_in_order(project):
    prompt = _prompt(project, "class+oracle").prompt
    assert prompt.index("# the enclosing class Shape") < prompt.index("# imports the function relies on")
    assert prompt.count("def __init__") == 1


def test_unknown_variant_fails_loudly():
    with pytest.raises(UsageError, match="unknown context variant 'oracel'.*one of: none, oracle"):
        PromptSpec(context="oracle+oracel")


def test_a_new_variant_is_one_registered_function(project, monkeypatch):
    monkeypatch.setattr(variants_mod, "_VARIANTS", dict(variants_mod._VARIANTS))

    @variant("path")
    def _path(view):
        return [variants_mod.ContextBlock("file", "where", f"# {view.task.file}")]

    assert _prompt(project, "path+none").prompt == "# where\n# pkg/shapes.py\n\n\n" + HEADER


def test_chat_rendering_has_context_section_and_fenced_header(project):
    rec = _prompt(project, "oracle")
    system, user = rec.messages
    assert system.role == "system" and user.role == "user"
    assert user.content.startswith("Context from `pkg/shapes.py` in project hp:\n\n```python\n# imports")
    assert user.content.endswith(f"```python\n{HEADER}```\n")
    assert "Context from" not in _prompt(project, "none").messages[1].content


# --- docstrings -----------------------------------------------------------------------------------------

def test_human_docstring_from_the_task_record(project):
    rec = _prompt(project, "none", _task(human_docstring="Join two labels."), docstring="human")
    assert rec.prompt == 'def label_twice(self, sep=" "):\n    """Join two labels."""\n'
    assert rec.prompt_id.endswith("@none:human")


def test_human_docstring_imported_by_alias_in_codereval_format(project, tmp_path):
    labels = tmp_path / "CEPythonHumanLabel.jsonl"
    labels.write_text(json.dumps({"question_id": "62e60f43d76274f8a4026e28", "input": "...",
                                  "signature": "...", "docstring": "Twice the label."}) + "\n")
    human = load_human_docstrings(labels)
    other = _task("label", lineno=25, aliases=["no-such-question"])
    build = build_prompts([_task(), other], lambda t: project, PromptSpec(context="file", docstring="human"),
                          human)
    [rec] = build.records
    assert '"""Twice the label."""' in rec.prompt and "circle area" not in rec.prompt
    assert build.skipped == [("hp/pkg/shapes.py::Shape.label", "no human-labeled docstring "
                              "(manifest or --human-docstrings)")]


def test_codereval_human_label_file_loads():
    path = CODEREVAL_DATA / "CEPythonHumanLabel.jsonl"
    if not path.exists():
        pytest.skip("CoderEval data not present")
    assert len(load_human_docstrings(path)) == 230


def test_bad_human_docstrings_file_says_which_line(tmp_path):
    bad = tmp_path / "h.jsonl"
    bad.write_text('{"question_id": "a", "docstring": "x"}\n{"id": 3}\n')
    with pytest.raises(UsageError, match=r"h.jsonl:2: expected a JSON object with question_id"):
        load_human_docstrings(bad)


def test_prompt_hash_follows_the_text(project):
    a, b = _prompt(project, "none"), _prompt(project, "none", _task(docstring="Other."))
    assert a.prompt_hash != b.prompt_hash and a.prompt_hash == _prompt(project, "none").prompt_hash


# --- token budget ---------------------------------------------------------------------------------------

def test_budget_cuts_the_file_before_the_oracle(project):
    full = _prompt(project, "oracle+file")
    rec = _prompt(project, "oracle+file", max_tokens=full.tokens - 60)
    assert rec.tokens <= full.tokens - 60 and not rec.over_budget
    assert len(rec.truncated) == 1 and rec.truncated[0].startswith("file: ")
    assert "# ... (cut to fit the token budget)" in rec.prompt
    assert "# imports the function relies on\nimport math" in rec.prompt and rec.prompt.endswith(HEADER)


def test_budget_drops_blocks_in_order_and_never_cuts_the_header(project):
    rec = _prompt(project, "oracle+class+all", max_tokens=5)
    assert rec.over_budget and rec.prompt == HEADER
    assert [n.split(":")[0] for n in rec.truncated] == ["oracle"] * 3 + ["class", "all"]
    assert all(n.endswith("dropped") for n in rec.truncated)


def test_approximate_tokenizer_counts_word_pieces():
    assert approx_count("def f(x):\n") == 7                 # def f ( x ) : \n
    assert approx_count("internationalization") == 5        # 20 chars -> 5 pieces
    assert get_tokenizer("approx") is APPROX
    assert get_tokenizer("auto").count("def f(x):") > 0
    with pytest.raises(UsageError, match="unknown tokenizer"):
        get_tokenizer("bpe")


# --- templates ------------------------------------------------------------------------------------------

def test_user_template_file_overrides_the_completion_template(project, tmp_path):
    tpl = tmp_path / "t.yaml"
    tpl.write_text("completion: |\n  # ${project}:${file}\n  ${context}${header}\n")
    rec = _prompt(project, "none", templates=load_templates(tpl))
    assert rec.prompt == "# hp:pkg/shapes.py\n" + HEADER + "\n"
    assert rec.messages[1].content.startswith("Complete the following Python function")  # default kept


def test_template_with_an_unknown_placeholder_is_refused(tmp_path):
    tpl = tmp_path / "t.yaml"
    tpl.write_text("user: 'Write ${funcname}'\n")
    with pytest.raises(UsageError, match="unknown placeholder.*funcname"):
        load_templates(tpl)


# --- the command ----------------------------------------------------------------------------------------

def test_prompts_command_renders_stored_tasks_from_the_checkout(project, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from coderun.cli.main import app
    from coderun.config import load_settings
    from coderun.envs.sources import checkout
    from coderun.manifests.schema import find_manifest
    from coderun.prompts import read_prompts
    from coderun.records import TaskStatus
    from coderun.tasks import store

    home, manifests = tmp_path / "home", tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "hp.yaml").write_text(f"name: hp\nsource:\n  path: {project}\npython: '3.11'\n")
    monkeypatch.setenv("CODERUN_HOME", str(home))
    settings = load_settings([manifests])
    commit = checkout(find_manifest("hp", settings), settings).commit
    labelled = _task(commit=commit, status=TaskStatus.VERIFIED, human_docstring="Join two labels.")
    unlabelled = _task("label", lineno=25, commit=commit, status=TaskStatus.VERIFIED)
    store.save_project(settings, "hp", commit, [labelled, unlabelled], "{}")

    out = tmp_path / "p.jsonl"
    args = ["prompts", "--projects", str(manifests), "--context", "oracle", "--docstring", "human", "-o", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "skipped hp/pkg/shapes.py::Shape.label: no human-labeled docstring" in result.output
    [rec] = read_prompts(out)
    assert rec.prompt.endswith('def label_twice(self, sep=" "):\n    """Join two labels."""\n')
    assert "# imports the function relies on\nimport math" in rec.prompt

    bad = CliRunner().invoke(app, ["prompts", "--projects", str(manifests), "--context", "orcale", "-o", str(out)])
    assert bad.exit_code == UsageError.exit_code and "unknown context variant 'orcale'" in bad.output
