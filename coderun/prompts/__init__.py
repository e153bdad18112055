"""Prompts: a task, a context variant and a docstring choice rendered for completion and chat models."""
