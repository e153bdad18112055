"""pass+: a pass must also do what the original does on inputs beyond the project's tests.

What it holds, in the order it happens: recording the original's calls while its tests run (`record`), the
build-time derivation of each task's inputs from them (`derive`, with the payloads and the reduction in
`inputs`), and, for a sample, the host side of the differential step (`differential`: comparing two
observations) and the verdict it gives (`grade`). The step's sandbox side is harness/coderun_differential.
"""
