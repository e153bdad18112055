# Dependencies layer: installs the wheelhouse that coderun built on the host from the manifest's
# install spec. --no-index: pip never looks at a package index, and the build has no network anyway.
ARG BASE
FROM ${BASE}
COPY wheels/ /tmp/coderun-wheels/
RUN set -eux; \
    /opt/venv/bin/python -m pip install --no-index --find-links /tmp/coderun-wheels \
        -r /tmp/coderun-wheels/requirements.txt; \
    /opt/venv/bin/python -m pip list --format=freeze > /opt/coderun/deps-freeze.txt; \
    rm -rf /tmp/coderun-wheels
