"""Evaluation: reading samples, splicing them into projects, running their tests, grading."""
