"""Python's own parser as the judge of syntax, with the target's version where it is older than the host's."""

from __future__ import annotations

import ast
import functools
import pickle
import subprocess
import sys
import threading
import warnings


def host_feature_version(python: tuple[int, int] | None) -> tuple[int, int] | None:
    """The `feature_version` for ast.parse: the target's version when older than the host's."""
    if python is None or python >= sys.version_info[:2]:
        return None
    return max(python, (3, 4))


# CPython 3.11's compiler is not safe to call from several threads at once ("AST constructor recursion
# depth mismatch", gh-106905), and evaluation splices in worker threads.
COMPILE_LOCK = threading.Lock()


def quiet_parse(code: str, python: tuple[int, int] | None) -> ast.Module:
    feature = host_feature_version(python)
    for _attempt in range(2):
        try:
            with warnings.catch_warnings(), COMPILE_LOCK:   # a sample's invalid escapes are its own business
                warnings.simplefilter("ignore")
                return ast.parse(code, feature_version=feature)
        except SystemError:
            # CPython 3.11 sometimes loses count of its AST recursion depth ("AST constructor recursion
            # depth mismatch"): parse again, then in a fresh interpreter, rather than blame the sample.
            continue
    return _parse_in_subprocess(code, feature)


def _parse_in_subprocess(code: str, feature: tuple[int, int] | None) -> ast.Module:
    script = ("import ast, pickle, sys, warnings\nwarnings.simplefilter('ignore')\n"
              "code, feature = pickle.load(sys.stdin.buffer)\n"
              "try:\n    out = ast.parse(code, feature_version=feature)\n"
              "except SyntaxError as e:\n    out = e\n"
              "pickle.dump(out, sys.stdout.buffer)\n")
    proc = subprocess.run([sys.executable, "-c", script], input=pickle.dumps((code, feature)),
                          capture_output=True, timeout=60)
    if proc.returncode != 0:
        raise SyntaxError(f"cannot parse: {proc.stderr.decode(errors='replace')[-200:]}")
    result = pickle.loads(proc.stdout)
    if isinstance(result, SyntaxError):
        raise result
    return result


def parses(code: str, python: tuple[int, int] | None) -> ast.Module | None:
    try:
        return quiet_parse(code, python)
    except (SyntaxError, ValueError):   # ValueError: null bytes
        return None


def syntax_message(code: str, python: tuple[int, int] | None) -> str:
    try:
        quiet_parse(code, python)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except ValueError as exc:
        return str(exc)
    return "does not parse"


def ast_defines(tree: ast.Module, name: str) -> bool:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return True
        if isinstance(node, ast.ClassDef) and ast_defines(ast.Module(body=node.body, type_ignores=[]), name):
            return True
    return False


def compile_error(source: str, python: tuple[int, int] | None) -> str | None:
    try:
        # Without a feature version to check, the source is compiled directly: half the time of building
        # the AST's Python objects first and compiling those.
        code = source if host_feature_version(python) is None else quiet_parse(source, python)
        with warnings.catch_warnings(), COMPILE_LOCK:
            warnings.simplefilter("ignore")
            compile(code, "<spliced>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        where = f"line {exc.lineno}: " if isinstance(exc, SyntaxError) else ""
        return f"{where}{getattr(exc, 'msg', str(exc))}"
    return None


@functools.lru_cache(maxsize=64)
def original_compiles(source: str, python: tuple[int, int] | None) -> bool:
    """The same file is checked for every sample of its task: once is enough."""
    return compile_error(source, python) is None
