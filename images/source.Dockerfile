# Source layer: the project's worktree at the recorded commit (without .git, after the manifest's
# pre_install commands, which coderun runs on the host), at /work/project, owned by `coderun`.
# IMPORT_ROOT is the manifest's import_root; the project is imported from the tree via PYTHONPATH.
ARG BASE
FROM ${BASE}
ARG IMPORT_ROOT=.
COPY --chown=coderun:coderun project/ /work/project/
ENV PYTHONPATH=/work/project/${IMPORT_ROOT}
