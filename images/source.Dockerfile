# Source layer: the project's worktree at the recorded commit, at /work/project, owned by `coderun`.
# IMPORT_ROOT is the manifest's import_root; the project is imported from the tree, not site-packages.
# setup/ holds the manifest's pre_install commands (run as `coderun` in the tree) and, when the
# manifest asks for it, the project's own wheel built on the host (installed --no-deps, for metadata).
ARG BASE
FROM ${BASE}
ARG IMPORT_ROOT=.
COPY --chown=coderun:coderun project/ /work/project/
COPY setup/ /tmp/coderun-setup/
USER coderun
RUN if [ -s /tmp/coderun-setup/pre_install.sh ]; then cd /work/project && sh -eux /tmp/coderun-setup/pre_install.sh; fi
USER root
RUN set -eux; \
    if ls /tmp/coderun-setup/*.whl >/dev/null 2>&1; then \
        /opt/venv/bin/python -m pip install --no-index --no-deps /tmp/coderun-setup/*.whl; \
    fi; \
    rm -rf /tmp/coderun-setup
ENV PYTHONPATH=/work/project/${IMPORT_ROOT}
