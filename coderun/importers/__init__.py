"""Turning other harnesses' released results into coderun runs."""
