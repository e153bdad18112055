"""Rigor beyond the project's tests (pass+): the original's recorded calls, inputs derived from them, and the
comparison of a sample's behaviour with the original's on them."""
