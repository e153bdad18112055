"""Pass@k and Acc@k: scoring many samples of a task (one sample is scored by `runner.grade`).

Pass@k
    Each task's by the unbiased estimator of Chen et al. (HumanEval), `coderun.stats.pass_at_k`. A
    benchmark's pass@k is the mean over tasks.

Tasks with fewer samples than k (`UnderK`)
    The estimator is undefined when n < k. Three policies:
    - `exclude` (default): the task is left out of pass@k for that k, and reports say how many were.
    - `codereval`: the task counts as solved (1.0) when any of its samples passed, else 0.0. This is the
      convention behind the numbers CoderEval's README gives for its released CodeGen results
      (9.49 / 19.63 / 23.48); HumanEval's reference code would return 1.0 for such a task even when none of
      its samples passed (23.91 at k=10 on the same file), so it is not that.
    - `pad`: missing samples count as failures, up to the largest k asked for (n' = max(n, max k)). This
      reproduces every figure printed in the CoderEval paper (Tables 3, 4 and 6: 9.48 / 19.58 / 23.48),
      which evidently scored a task with 9 samples as a task with 10.

Acc@k (CoderEval §5.2.1)
    The recall of the oracle implementation's context tokens (type references, API invocations, variable
    references) in the generated code: a token is hit when one of k samples contains it, and Acc@k is
    hit tokens / expected tokens, pooled over all tokens of all tasks (micro average), overall and per kind.
    For n samples of which m contain a token, the chance that one of k random samples contains it is
    pass_at_k(n, m, k), so Acc@k uses the same unbiased estimator and the same `UnderK` policies.
    A sample "contains" a token when the token appears as an identifier of the sample's code (Python
    tokens, so words inside strings and comments do not count, but the expressions of f-strings do); a
    dotted token (`os.path.join`) must appear as that attribute chain (or as an import of its last name
    from the rest, `from os.path import join`), `super().x` as such, and a token `self.x` / `cls.x` also
    matches the attribute `x` of another object (`obj.x`, not a bare name `x`).
    The code read is what the model wrote: the target's body, its docstring aside, and whatever else the
    sample defines, never the target's header (decorators and signature), which the prompt gives
    (`acc_code`). The tokens expected are the oracle context's that the original's body uses, read the same
    way (`body_context`): CoderEval's oracle context is "the information that the original function body
    actually depends on". So the original scores 100% and a body that only raises 0%, but for the
    `NotImplementedError` of an original that raises it too.
"""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

from coderun.errors import UsageError
from coderun.prompts.source import header_colon
from coderun.records import ContextSet
from coderun.stats import pass_at_k

CONTEXT_KINDS = ("classes", "apis", "vars")


class UnderK(str, Enum):
    EXCLUDE = "exclude"
    CODEREVAL = "codereval"
    PAD = "pad"


def task_pass_at_k(n: int, c: int, k: int, under_k: UnderK = UnderK.EXCLUDE,
                   pad_to: int | None = None) -> float | None:
    """pass@k of one task under a policy for n < k; None means the task is left out."""
    if under_k is UnderK.PAD:
        n = max(n, pad_to if pad_to is not None else k)
    if n >= k and n > 0:
        return pass_at_k(n, c, k)
    if under_k is UnderK.CODEREVAL:
        return 1.0 if c > 0 else 0.0
    return None


@dataclass(frozen=True)
class PassAtK:
    k: int
    value: float | None          # mean over the tasks used; None when no task could be used
    tasks: int                   # tasks used
    excluded: int                # tasks left out because they had fewer than k samples


def per_task_pass_at_k(counts: dict[str, tuple[int, int]], k: int, under_k: UnderK = UnderK.EXCLUDE,
                       pad_to: int | None = None) -> dict[str, float]:
    """task id -> pass@k for every task the policy keeps (the vector a paired bootstrap resamples)."""
    out: dict[str, float] = {}
    for task_id, (n, c) in counts.items():
        value = task_pass_at_k(n, c, k, under_k, pad_to)
        if value is not None:
            out[task_id] = value
    return out


def aggregate_pass_at_k(counts: dict[str, tuple[int, int]], ks: Sequence[int],
                        under_k: UnderK = UnderK.EXCLUDE) -> dict[int, PassAtK]:
    """Mean pass@k over tasks, for every k; `counts` maps task id -> (samples, correct)."""
    check_ks(ks)
    pad_to = max(ks)
    out: dict[int, PassAtK] = {}
    for k in ks:
        vector = per_task_pass_at_k(counts, k, under_k, pad_to)
        value = sum(vector.values()) / len(vector) if vector else None
        out[k] = PassAtK(k=k, value=value, tasks=len(vector), excluded=len(counts) - len(vector))
    return out


def check_ks(ks: Sequence[int]) -> None:
    if not ks:
        raise UsageError("give at least one k (e.g. -k 1,5,10)")
    bad = [k for k in ks if k < 1]
    if bad:
        raise UsageError(f"k must be a positive integer, got {bad[0]}")


def parse_ks(text: str) -> list[int]:
    """'1,5,10' -> [1, 5, 10] (sorted, unique), with a clear message for anything else."""
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise UsageError(f"-k takes comma-separated positive integers such as 1,5,10, got {text!r}") from None
    check_ks(ks)
    return ks


# ---------------------------------------------------------------------------------------------- Acc@k

_NAME_CHAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)*")


def code_identifiers(code: str, package: str = "") -> frozenset[str]:
    """Identifiers and attribute chains (with all their suffixes and prefixes) used in `code`; an attribute
    chain's parts after the first also as `.x` (an attribute access, for `token_hit`'s `self.x`).

    Strings and comments are not code; Python's tokenizer separates them. Code that does not tokenize
    (a truncated sample) falls back to a regex over the text with string literals and comments removed
    as far as a line-by-line scan can tell. Code that parses adds what the tokenizer does not see as chains
    (tokens_from_tree): f-strings' expressions, `super().x`, `module.name` of `from module import name`
    (`package`, the dotted package of the code's file, resolves a relative import's module).
    """
    chains = _chains_from_tokens(code)
    if chains is None:
        chains = [re.sub(r"\s+", "", m.group(0)) for m in _NAME_CHAIN.finditer(_strip_strings(code))]
    out: set[str] = set()
    for chain in [*chains, *_chains_from_tree(code, package)]:
        parts = chain.split(".")
        for i in range(len(parts)):
            for j in range(i + 1, len(parts) + 1):
                out.add(".".join(parts[i:j]))
                if i:
                    out.add("." + ".".join(parts[i:j]))
    return frozenset(out)


def _chains_from_tree(code: str, package: str) -> list[str]:
    tree = _parse(code)
    if tree is None:
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = _absolute(node.module or "", node.level, package)
            out += [f"{module}.{a.name}" for a in node.names if a.name != "*" and module]
        elif isinstance(node, ast.Attribute | ast.Name) and not isinstance(getattr(node, "_parent", None),
                                                                             ast.Attribute):
            chain = _chain(node)
            out += [chain] if chain else []
        for child in ast.iter_child_nodes(node):
            child._parent = node  # type: ignore[attr-defined]
    return out


def _absolute(module: str, level: int, package: str) -> str:
    """The module a `from` import names, a relative one resolved against `package` ("" when it cannot be)."""
    if not level:
        return module
    parts = package.split(".") if package else []
    if level - 1 > len(parts) or not package:
        return ""
    return ".".join([*parts[:len(parts) - (level - 1)], *([module] if module else [])])


def module_package(file: str) -> str:
    """The dotted package of a project file (`pkg/sub/mod.py` and `pkg/sub/__init__.py`: `pkg.sub`); a
    layout's own prefix (`src.`) stays, matched as a suffix like any chain."""
    return ".".join(file.split("/")[:-1])


def _chain(node: ast.expr) -> str | None:
    """`a.b.c`, or `super().x`, for a Name / Attribute expression (None for other bases)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = node.value
        if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super":
            return f"super().{node.attr}"
        head = _chain(base)
        return f"{head}.{node.attr}" if head else node.attr
    return None


def _parse(code: str) -> ast.Module | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.parse(code)
        except (SyntaxError, ValueError):
            return None


def acc_code(code: str, name: str) -> str:
    """The code Acc@k reads of a sample (or of the original) for the function `name`: all of it but the header
    of the first definition of `name` (its decorators and signature, the prompt's), replaced by `if 1:`; read
    whole when no header of `name` is found. Code that does not parse (a truncated sample) is cut the same way."""
    code = textwrap.dedent(code)   # a method's source as the file has it
    found = re.search(rf"^[ \t]*((?:async[ \t]+)?def[ \t]+{re.escape(name)}\b)", code, re.MULTILINE)
    if found is None:
        return code
    end = _header_end(code, found.start(1))
    if end is None:
        return code
    start = found.start(1)
    line_start = code.rfind("\n", 0, start) + 1
    while line_start > 0:   # decorator lines right above the def
        above = code.rfind("\n", 0, line_start - 1) + 1
        if not code[above:line_start].lstrip().startswith("@"):
            break
        start, line_start = above + len(code[above:line_start]) - len(code[above:line_start].lstrip()), above
    return code[:start] + "if 1:" + code[end:]


def _header_end(code: str, at: int) -> int | None:
    """The offset just past the colon that ends the signature starting at `at` (None: none before the code ends)."""
    text = code[at:]
    colon = header_colon(text)
    if colon is None:
        return None
    row, col = colon
    return at + sum(len(line) for line in text.splitlines(keepends=True)[:row - 1]) + col


def body_context(context: ContextSet, source: str, name: str, file: str = "") -> ContextSet:
    """The tokens of `context` (the analyzer's oracle context of a function) that its body uses (read by
    acc_code from `source`, the function's own code, in `file`): the ones Acc@k expects of a sample."""
    ids = code_identifiers(acc_code(source, name), module_package(file))
    return ContextSet(**{kind: [t for t in getattr(context, kind) if token_hit(t, ids)] for kind in CONTEXT_KINDS})


def _chains_from_tokens(code: str) -> list[str] | None:
    chains: list[str] = []
    current: list[str] = []
    expect_name = True
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            if tok.type == tokenize.NAME and expect_name:
                current.append(tok.string)
                expect_name = False
            elif tok.type == tokenize.OP and tok.string == "." and current and not expect_name:
                expect_name = True
            else:
                if current:
                    chains.append(".".join(current))
                current = [tok.string] if tok.type == tokenize.NAME else []
                expect_name = not current
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    if current:
        chains.append(".".join(current))
    return chains


def _strip_strings(code: str) -> str:
    code = re.sub(r'("""|\'\'\')(?:.|\n)*?\1', " ", code)
    # The two branches cannot match the same text (the second takes no backslash): with overlapping ones, an
    # unclosed string full of escapes (a truncated sample's "\t\t\t...) backtracks exponentially.
    code = re.sub(r"(\"|')(?:\\.|(?!\1)[^\\\n])*\1", " ", code)
    return re.sub(r"#[^\n]*", " ", code)


def token_hit(token: str, identifiers: frozenset[str]) -> bool:
    token = re.sub(r"\s+", "", token)
    if token in identifiers:
        return True
    head, _, rest = token.partition(".")
    return head in ("self", "cls") and bool(rest) and "." + rest in identifiers


@dataclass(frozen=True)
class AccAtK:
    k: int
    overall: float | None
    kinds: dict[str, float | None]     # classes / apis / vars
    tokens: int                        # expected tokens counted
    tasks: int                         # tasks with at least one expected token, kept by the policy
    excluded: int


def task_token_hits(context: ContextSet, samples: Iterable[str], package: str = ""
                    ) -> dict[str, list[tuple[str, int]]]:
    """kind -> [(token, number of samples containing it)] for one task (`package`: of the task's file)."""
    idents = [code_identifiers(code, package) for code in samples]
    out: dict[str, list[tuple[str, int]]] = {}
    for kind in CONTEXT_KINDS:
        tokens = dict.fromkeys(getattr(context, kind))     # unique, in order
        out[kind] = [(t, sum(token_hit(t, ids) for ids in idents)) for t in tokens]
    return out


def aggregate_acc_at_k(tasks: dict[str, tuple[int, dict[str, list[tuple[str, int]]]]], ks: Sequence[int],
                       under_k: UnderK = UnderK.EXCLUDE) -> dict[int, AccAtK]:
    """Pooled Acc@k; `tasks` maps task id -> (samples, task_token_hits(...))."""
    check_ks(ks)
    pad_to = max(ks)
    out: dict[int, AccAtK] = {}
    for k in ks:
        hit = dict.fromkeys(CONTEXT_KINDS, 0.0)
        total = dict.fromkeys(CONTEXT_KINDS, 0)
        used = excluded = 0
        for n, hits in tasks.values():
            if not any(hits.values()):
                continue
            if task_pass_at_k(n, 0, k, under_k, pad_to) is None:
                excluded += 1
                continue
            used += 1
            for kind, tokens in hits.items():
                for _, m in tokens:
                    hit[kind] += task_pass_at_k(n, m, k, under_k, pad_to) or 0.0
                    total[kind] += 1
        kinds = {kind: (hit[kind] / total[kind] if total[kind] else None) for kind in CONTEXT_KINDS}
        n_tokens = sum(total.values())
        overall = sum(hit.values()) / n_tokens if n_tokens else None
        out[k] = AccAtK(k=k, overall=overall, kinds=kinds, tokens=n_tokens, tasks=used, excluded=excluded)
    return out
