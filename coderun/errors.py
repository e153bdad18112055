"""The one exception hierarchy of coderun.

    CoderunError                  base; carries a user-facing message and an exit code
    ├── UsageError                bad command-line input (exit 2)
    ├── ManifestError             a project manifest does not validate (exit 2)
    ├── ConfigError               coderun's config file is unreadable or holds a bad value (exit 2)
    ├── ProjectNotFound           no built-in or user manifest of that name (exit 2)
    ├── SourceError               cloning, downloading or unpacking a project failed (exit 3)
    ├── EnvironmentBuildError     building a venv or image failed (exit 4)
    ├── AnalysisError             the analyzer could not run at all (exit 5)
    ├── TaskError                 task building or lookup failed (exit 5)
    ├── SandboxError              the sandbox itself broke: never a sample's fault (exit 6)
    │   ├── SandboxUnavailable    the requested backend cannot be used here (no engine, no image)
    │   └── ServiceError          a server the tests need (tests.services) is missing or did not start
    ├── StoreError                the run store is unreadable or unwritable (exit 7)
    ├── GenerationError           the model server could not be used (exit 8)
    └── ServeError                the verdict service refused a request or could not be reached (exit 9)

Errors from docker, git, tree-sitter and jedi are converted to these where they enter coderun;
the CLI prints `message` (and `hint`, when given) and exits with `exit_code`.
"""

from __future__ import annotations


class CoderunError(Exception):
    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class UsageError(CoderunError):
    exit_code = 2


class ManifestError(CoderunError):
    exit_code = 2


class ConfigError(CoderunError):
    exit_code = 2


class ProjectNotFound(CoderunError):
    exit_code = 2


class SourceError(CoderunError):
    exit_code = 3


class EnvironmentBuildError(CoderunError):
    exit_code = 4

    def __init__(self, message: str, *, hint: str | None = None, log_path: str | None = None,
                 log_tail: str | None = None):
        super().__init__(message, hint=hint)
        self.log_path = log_path
        self.log_tail = log_tail

    def __str__(self) -> str:
        parts = [self.message]
        if self.log_tail:
            parts.append("  last lines of the log:\n" + "\n".join(
                "    " + line for line in self.log_tail.rstrip().splitlines()))
        if self.log_path:
            parts.append(f"  full log: {self.log_path}")
        if self.hint:
            parts.append(f"  hint: {self.hint}")
        return "\n".join(parts)


class AnalysisError(CoderunError):
    exit_code = 5


class TaskError(CoderunError):
    exit_code = 5


class SandboxError(CoderunError):
    exit_code = 6


class SandboxUnavailable(SandboxError):
    pass


class ServiceError(SandboxError):
    pass


class StoreError(CoderunError):
    exit_code = 7


class GenerationError(CoderunError):
    exit_code = 8


class ServeError(CoderunError):
    exit_code = 9

    def __init__(self, message: str, *, hint: str | None = None, status: int | None = None):
        super().__init__(message, hint=hint)
        self.status = status        # the HTTP status the service answered (None: no answer)


# A child process's error, for the process that started it (`tasks build --at-once`): the same class, words
# and log as the child printed, so a build side by side with others fails in the words it fails alone.
ERROR_FILE_VARIABLE = "CODERUN_ERROR_FILE"
_CARRIED = ("log_path", "log_tail", "status")


def error_record(e: CoderunError) -> dict:
    return {"class": type(e).__name__, "message": e.message, "hint": e.hint,
            **{k: getattr(e, k) for k in _CARRIED if getattr(e, k, None) is not None}}


def from_record(record: dict) -> CoderunError:
    cls = globals().get(str(record.get("class")))
    if not (isinstance(cls, type) and issubclass(cls, CoderunError)):
        cls = CoderunError
    e = cls(str(record.get("message", "")), hint=record.get("hint"))
    for k in _CARRIED:
        if k in record:
            setattr(e, k, record[k])
    return e
