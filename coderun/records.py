"""Typed records that travel between pipeline stages (and are saved to disk / the run store).

Stages exchange these, never loose dicts: baseline test outcomes (environments → tasks → grading),
analysis contexts (analyzer → tasks → prompts → Acc@k) and task records (tasks → prompts → evaluation).
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Level(str, Enum):
    """CoderEval's runnable levels, in increasing order of dependency (Table 1)."""

    SELF_CONTAINED = "self_contained"
    SLIB_RUNNABLE = "slib_runnable"
    PLIB_RUNNABLE = "plib_runnable"
    CLASS_RUNNABLE = "class_runnable"
    FILE_RUNNABLE = "file_runnable"
    PROJECT_RUNNABLE = "project_runnable"

    @property
    def rank(self) -> int:
        return list(Level).index(self)

    @property
    def standalone(self) -> bool:
        return self in (Level.SELF_CONTAINED, Level.SLIB_RUNNABLE)

    @classmethod
    def parse(cls, value: str) -> Level:
        try:
            return cls(value)
        except ValueError:
            from coderun.errors import UsageError

            raise UsageError(f"unknown level {value!r}; one of: {', '.join(v.value for v in cls)}") from None


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ContextSet(Record):
    """CoderEval's context shape: type references, API invocations, variable references."""

    classes: list[str] = Field(default_factory=list)
    apis: list[str] = Field(default_factory=list)
    vars: list[str] = Field(default_factory=list)

    def tokens(self) -> list[str]:
        return [*self.classes, *self.apis, *self.vars]


Outcome = Literal["passed", "failed", "error", "skipped"]
# How bad an outcome is: a test reported more than once (a call failure and a teardown error) counts as its worst.
OUTCOME_RANK: dict[str, int] = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


class TestOutcome(Record):
    __test__ = False  # not a pytest test class

    nodeid: str
    outcome: Outcome
    duration: float = 0.0
    message: str = ""


class Baseline(Record):
    """Every test's outcome on the original code, as recorded when an environment is built."""

    project: str
    commit: str
    python: str
    backend: Literal["local", "docker"]
    tests: list[TestOutcome]
    ignored: list[str] = Field(default_factory=list)
    # Tests stopped at the per-test limit or that ended the test process: failed or left out, never mapped.
    timed_out: list[str] = Field(default_factory=list)
    duration: float = 0.0
    exit_code: int = 0

    def counts(self) -> dict[str, int]:
        out = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
        for t in self.tests:
            out[t.outcome] += 1
        out["ignored"] = len(self.ignored)
        out["timed_out"] = len(self.timed_out)
        return out

    def passing(self) -> set[str]:
        return {t.nodeid for t in self.tests if t.outcome == "passed"}


class TaskStatus(str, Enum):
    VERIFIED = "verified"      # original passes its tests three times; a missing body fails one
    WEAK = "weak"              # the tests do not notice the body missing
    FLAKY = "flaky"            # every mapped test was flaky
    UNCOVERED = "uncovered"    # no test executes the body
    BROKEN = "broken"          # the original does not pass its own tests
    UNRESOLVED = "unresolved"  # the manifest names a function the analyzer cannot find


class NetworkAttempt(Record):
    """A test that tried to reach a non-loopback address in the coverage run: its outcome may depend on
    the network the sandbox happens to have (a request that fails offline and is caught, say)."""

    nodeid: str
    addresses: list[str] = Field(default_factory=list)   # "host:port" as the test asked for them, first few


class ConfigurationTests(Record):
    """The tests a task runs in one of the manifest's `tests.configurations`: those of its mapped tests
    that pass the original there (a test skipped in a configuration is not expected in it)."""

    name: str
    tests: list[str] = Field(default_factory=list)


class TaskInputs(Record):
    """The inputs of a task's differential step (pass+): calls of the original recorded while its tests ran
    and inputs derived from them, each with what the original did on it (kept on the host: the sandbox
    running a sample gets the inputs, never these observations)."""

    task_id: str
    target: dict[str, object]                 # file, qualname, name, lineno, first, end_lineno
    inputs: list[str] = Field(default_factory=list)      # pickled (args, kwargs), base64
    expected: list[dict] = Field(default_factory=list)   # the original's observation per input
    origins: list[str] = Field(default_factory=list)     # "recorded" | "mutated" per input
    limit: float = 1.0                        # seconds per call
    budget: float = 30.0                      # seconds for the whole step


class RigorSummary(Record):
    """What a task's differential step has, in numbers (on the task record; the inputs are stored apart)."""

    recorded: int = 0                         # distinct deterministic calls recorded from the tests
    seen: int = 0                             # calls of the function while its tests ran
    uncaptured: dict[str, int] = Field(default_factory=dict)  # why calls were not recorded (unpicklable, ...)
    nondeterministic: int = 0                 # recorded calls whose results differed between runs
    candidates: int = 0                       # recorded + derived inputs the original accepted
    mutants: int = 0                          # mutants of the original the inputs were chosen against
    inputs: int = 0                           # inputs kept (the reduced set)
    augmented: int = 0                        # of them, derived rather than recorded
    dropped: int = 0                          # kept inputs whose confirming run disagreed (nondeterminism)
    note: str = ""                            # why there are no inputs

    @property
    def checked(self) -> bool:
        return self.inputs > 0


def task_id(project: str, file: str, qualname: str) -> str:
    """A task's id: project, file and qualified name (`cachetools/cachetools/func.py::lru_cache`)."""
    return f"{project}/{file}::{qualname}"


class Task(Record):
    """One function to regenerate inside its project."""

    task_id: str                       # "project/path/to/file.py::Class.method"
    aliases: list[str] = Field(default_factory=list)
    project: str
    commit: str
    file: str                          # relative to the repository root
    qualname: str
    name: str
    lineno: int
    end_lineno: int
    is_async: bool = False
    class_name: str | None = None
    signature: str
    docstring: str
    human_docstring: str | None = None
    source: str                        # the original function, decorators included
    level: Level
    oracle_context: ContextSet = Field(default_factory=ContextSet)
    all_context: ContextSet = Field(default_factory=ContextSet)
    tests: list[str] = Field(default_factory=list)          # pytest node ids
    test_files: list[str] = Field(default_factory=list)
    test_durations: dict[str, float] = Field(default_factory=dict)
    mapping: Literal["coverage", "filename", "none"] = "none"
    flaky_tests: list[str] = Field(default_factory=list)
    status: TaskStatus = TaskStatus.UNCOVERED
    explicit: bool = False             # listed in the manifest rather than discovered
    supplementary: bool = False        # some of its tests are the manifest's supplementary ones (not upstream's)
    # A sample passes only if it passes in every configuration; empty: one run of `tests` with tests.env.
    configurations: list[ConfigurationTests] = Field(default_factory=list)
    # The tests still pass with the body replaced by `return None` in every configuration: they do
    # not check what the function returns. The task stays in the benchmark, marked (see docs/tasks.md).
    pass_stub_passes: bool = False
    # The trivial bodies (tasks/trivial names: none, first_arg, empty, constant) with which the tests still
    # pass in every configuration: what the tests do not check. Kept and marked like pass_stub_passes.
    trivial_passes: list[str] = Field(default_factory=list)
    # Of trivial_passes, those pass+ lets through as well (run on the task's differential inputs at build;
    # all of them when it has none). None: not checked (a store from before), taken as all of them.
    trivial_plus_passes: list[str] | None = None
    # Mapped tests that tried to reach the network in the coverage run (environment-dependent).
    network_tests: list[NetworkAttempt] = Field(default_factory=list)
    # The differential step's inputs, in numbers (None: never built for this task).
    rigor: RigorSummary | None = None

    @property
    def environment_dependent(self) -> bool:
        return bool(self.network_tests)

    def trivially_passed(self, rigor: str = "base") -> list[str]:
        """The trivial bodies that get the verdict `rigor` (base: the project's tests; plus: pass+) on this
        task: a task with any does not check what the headline says it does (left out unless --include-weak)."""
        if rigor == "plus" and self.trivial_plus_passes is not None:
            return list(self.trivial_plus_passes)
        return list(self.trivial_passes)

    def flags(self) -> list[str]:
        """What the task build found about its tests, as `tasks list`, `eval` and the reports name it: `weak`
        (a `raise` or `return None` body passes them), `trivial:NAMES` (other trivial bodies do), `network`
        (some tried to reach the network), `supplementary` (some were written for the benchmark)."""
        others = [n for n in self.trivial_passes if n != "none"]
        weak = self.pass_stub_passes or self.status is TaskStatus.WEAK
        return ((["weak"] if weak else []) + ([f"trivial:{','.join(others)}"] if others else [])
                + (["network"] if self.network_tests else []) + (["supplementary"] if self.supplementary else []))

    def runs(self) -> list[ConfigurationTests]:
        """What a sample of this task runs: each configuration's tests, or one run of `tests`."""
        return self.configurations or [ConfigurationTests(name="", tests=list(self.tests))]

    def own_doctests(self) -> list[str]:
        """The mapped tests that are the doctests of the target's own docstring: pytest names them
        `FILE::MODULE.QUALNAME`, MODULE the dotted name of FILE (or its last parts, as imported)."""
        module = self.file.removesuffix(".py").removesuffix("/__init__").split("/")
        out = []
        for nodeid in dict.fromkeys(n for conf in self.runs() for n in conf.tests):
            path, _, name = nodeid.partition("::")
            prefix = name.removesuffix("." + self.qualname)
            if path == self.file and prefix != name and module[-len(prefix.split(".")):] == prefix.split("."):
                out.append(nodeid)
        return out


class Unverified(str, Enum):
    """Why a target the manifest declares is not a verified task."""

    ABSENT = "absent"                  # the function is not in the source at the built commit
    NO_TESTS_REACH = "no_tests_reach"  # no passing test executes its body
    ORIGINAL_FAILS = "original_fails"  # the original fails every mapped test
    FLAKY = "flaky"                    # every mapped test failed in some run of the original
    STUB_PASSES = "stub_passes"        # the tests pass with the body replaced by `raise NotImplementedError`
    SOURCE_FAILED = "source_failed"    # the source could not be fetched
    ENV_FAILED = "env_failed"          # the environment (install, baseline) could not be built
    BUILD_FAILED = "build_failed"      # the task build failed otherwise (analysis, sandbox)

    @classmethod
    def of(cls, status: TaskStatus) -> Unverified | None:
        """The reason a built task with `status` is not verified (None: it is)."""
        return {TaskStatus.WEAK: cls.STUB_PASSES, TaskStatus.FLAKY: cls.FLAKY,
                TaskStatus.UNCOVERED: cls.NO_TESTS_REACH, TaskStatus.BROKEN: cls.ORIGINAL_FAILS,
                TaskStatus.UNRESOLVED: cls.ABSENT}.get(status)


class TargetOutcome(Record):
    """What became of one `tasks.targets` entry of a manifest in the latest task build of its project."""

    project: str
    function: str                      # as the manifest writes it: "path/file.py::Qual.name"
    task_id: str
    aliases: list[str] = Field(default_factory=list)
    reason: Unverified | None = None   # None: verified
    detail: str = ""                   # the build's own words (an error message, a verification reason)
    status_note: str | None = None     # the manifest's note on why it is not expected to verify
    supplementary: bool = False        # verified through supplementary tests

    @property
    def verified(self) -> bool:
        return self.reason is None

    @property
    def stale_note(self) -> bool:
        """The manifest says it cannot verify, yet it did: the note is out of date."""
        return self.verified and bool(self.status_note)


class FindingKind(str, Enum):
    """What a run was seen to touch. The value is the stable code: the reporter writes it, the run store
    keeps it. `machinery` says whether the kind decides the verdict (see runner/grade)."""

    # from the project copy's files, before and after the run (runner/evidence)
    TEST_FILE_MODIFIED = "test_file_modified"
    TEST_FILE_DELETED = "test_file_deleted"
    PROJECT_FILE_MODIFIED = "project_file_modified"
    PROJECT_FILE_DELETED = "project_file_deleted"
    CONFTEST_CREATED = "conftest_created"
    PYTHON_FILE_CREATED = "python_file_created"
    # from the reporter's records, judged by the host
    PLUGIN_REGISTERED_AT_COLLECTION = "plugin_registered_at_collection"
    REPORTER_CHANNEL_OVERFLOW = "reporter_channel_overflow"
    # written by the reporter inside the sandbox (harness/coderun_reporter.py)
    PYTEST_REPLACED = "pytest_replaced"
    UNITTEST_REPLACED = "unittest_replaced"
    REPORTER_REPLACED = "reporter_replaced"
    PLUGIN_REGISTERED_DURING_TESTS = "plugin_registered_during_tests"
    RUNTIME_REPLACED = "runtime_replaced"            # a builtin, or a sys attribute pytest calls
    OUTCOME_FORGED = "outcome_forged"                # a phase that raised, reported otherwise
    TESTS_CHANGED = "tests_changed"                  # the collected test code changed, or is not its files' code
    # the records' pass not borne out by what the process wrote elsewhere (runner/corroborate)
    UNCORROBORATED = "uncorroborated"
    UNKNOWN_REPORTER_CODE = "unknown_reporter_code"   # a code coderun does not know: fail safe
    # read from runs stored before findings had kinds (a plain message, sorted by its words as grading did)
    LEGACY_MACHINERY = "legacy_machinery"
    LEGACY_NOTE = "legacy_note"

    @property
    def machinery(self) -> bool:
        """Whether the outcomes themselves may be forged: the run fails as tampering, whatever they say.
        Other kinds (another module changed, a new .py file) are reported but do not decide the verdict."""
        return self not in _NOT_MACHINERY


_NOT_MACHINERY = frozenset({FindingKind.PROJECT_FILE_MODIFIED, FindingKind.PROJECT_FILE_DELETED,
                            FindingKind.PYTHON_FILE_CREATED, FindingKind.REPORTER_CHANNEL_OVERFLOW,
                            FindingKind.LEGACY_NOTE})


class Finding(Record):
    """One sign that a run touched the project or the test machinery: graded on its kind, never its words."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: FindingKind
    detail: str                              # what a person reads (the file, hook or plugin, in words)


class Evidence(Record):
    """What one sample's test run showed, as read from outside the sample's reach."""

    expected: list[str]                      # node ids that had to run
    outcomes: list[TestOutcome] = Field(default_factory=list)  # from the reporter channel
    exit_code: int | None = None             # of the test process, seen from outside
    timed_out: bool = False
    infra_error: str | None = None           # the sandbox broke: neither pass nor fail
    duration: float = 0.0
    log_tail: str = ""                       # last lines of stdout/stderr (for failure classes)
    log_path: str | None = None
    tampering: list[Finding] = Field(default_factory=list)  # signs the sample touched the project or tests
    integrity_ms: float | None = None        # the reporter's integrity check (snapshot + verifies), its cost
    differential: dict | None = None         # the differential step's record (observations per input)
    collect_seconds: float | None = None     # start-up and collection, from the reporter's `collected` record

    def machinery(self) -> list[Finding]:
        """The findings that mean the outcomes may be forged (see FindingKind.machinery)."""
        return [f for f in self.tampering if f.kind.machinery]


class VerdictKind(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    INFRA = "infra"


class Verdict(Record):
    verdict: VerdictKind
    failure: str | None = None               # failure class when not a pass (see runner/taxonomy)
    reason: str = ""                          # one line a person can read


class PlusOutcome(Record):
    """A sample's verdict on the project's tests (`base`) and with the differential step too (`plus`, pass+);
    the run's headline verdict is one of them (`coderun eval --rigor`)."""

    base: VerdictKind
    base_failure: str | None = None
    base_reason: str = ""
    plus: VerdictKind
    plus_failure: str | None = None
    plus_reason: str = ""
    checked: bool = False                    # the task has differential inputs (else plus is base)

    def verdict(self, rigor: str) -> Verdict:
        if rigor == "plus":
            return Verdict(verdict=self.plus, failure=self.plus_failure, reason=self.plus_reason)
        return Verdict(verdict=self.base, failure=self.base_failure, reason=self.base_reason)


class Package(Record):
    """One installed distribution: its name as its metadata spells it, and its version."""

    name: str
    version: str

    def __str__(self) -> str:
        return f"{self.name}=={self.version}"


class CoderunEnvironment(Record):
    """coderun's own side of a run: its version, the interpreter running it, and the installed version of
    every distribution its requirements pull in (the closure, markers evaluated)."""

    coderun: str
    python: str                        # "3.11.7"
    implementation: str = ""           # "CPython"
    platform: str = ""                 # platform.platform()
    packages: list[Package] = Field(default_factory=list)
    missing: list[str] = Field(default_factory=list)   # required (marker true) but not installed


class ProjectSource(Record):
    """Where a project's code came from: the manifest's source, the commit, and what was actually read (a
    clone URL, a local mirror, an sdist file, a folder)."""

    kind: Literal["git", "pypi", "path"]
    commit: str
    origin: str = ""
    upstream: str = ""  # the source's own commit, where `commit` adds the benchmark's supplementary tests


class ProjectEnvironment(Record):
    """A project's test environment: its interpreter and everything installed in it, recorded when the
    environment was built (or, for one built before coderun recorded it, when a run first used it)."""

    project: str
    backend: Literal["local", "docker"]
    where: str                         # the venv's folder, or the image's tag and id
    python: str                        # "3.11.7"
    packages: list[Package] = Field(default_factory=list)   # everything installed, pip and pytest included
    recorded_at: str = ""
    source: ProjectSource | None = None  # set by the run that uses the environment

    def version_of(self, name: str) -> str | None:
        key = _canonical(name)
        return next((p.version for p in self.packages if _canonical(p.name) == key), None)


class RunEnvironment(Record):
    """What ran a benchmark: coderun's side (recorded at run start) and each evaluated project's
    environment (recorded when the run first used it; a resumed run keeps both)."""

    coderun: CoderunEnvironment
    projects: dict[str, ProjectEnvironment] = Field(default_factory=dict)
    isolation: str = ""                # how samples were kept apart: container, namespaces or none ("": older)
    isolation_note: str = ""           # what made them (bubblewrap's version), or why there were none


def _canonical(name: str) -> str:
    from packaging.utils import canonicalize_name

    return canonicalize_name(name)
