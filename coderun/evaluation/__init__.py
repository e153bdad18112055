"""Evaluation runs: samples in, verdicts stored (start_run, execute, the run store)."""
