"""What splicing a sample gives: the spliced file, or why the sample cannot be run."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field


class SpliceErrorKind(str, Enum):
    SYNTAX = "syntax"                          # the sample (or the spliced file) does not parse
    MISSING_DEFINITION = "missing_definition"  # the sample has no definition of the target name


class SpliceResult(BaseModel):
    """The spliced file, or why the sample cannot be run (graded as a syntax failure)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ok: bool
    new_source: str | None = None
    error: SpliceErrorKind | None = None
    message: str = ""
    function_code: str | None = None            # the sample's definition as inserted
    function_lines: tuple[int, int] | None = None  # 1-based, inclusive, in new_source
    helper_names: list[str] = Field(default_factory=list)
    hoisted_imports: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class SampleSyntaxError(Exception):
    """Internal: the sample cannot be used; carries the error kind for SpliceResult."""

    def __init__(self, kind: SpliceErrorKind, message: str, notes: list[str] | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.notes = notes or []
