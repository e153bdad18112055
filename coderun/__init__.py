"""coderun: a project-level, context-aware benchmark runner for code-generating models."""

__version__ = "0.1.0"
