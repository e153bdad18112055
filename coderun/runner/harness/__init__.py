"""Files coderun copies into a sandbox's harness folder and runs there with the project's own interpreter.

They import nothing from coderun (the project's Python may be 3.7 and has none of coderun's dependencies);
the host imports them only to read their constants and in tests.
"""
