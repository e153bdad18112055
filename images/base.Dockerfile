# Base image: a Python with a venv at /opt/venv and an unprivileged user `coderun`.
# BASE is the imported Debian root filesystem (rootfs strategy) or python:X.Y-slim (pull strategy);
# PYTHON is that image's interpreter. Built with networking disabled: nothing here downloads anything.
ARG BASE
FROM ${BASE}
ARG PYTHON=python3
RUN set -eux; \
    useradd --create-home --uid 1000 --user-group --shell /bin/sh coderun; \
    "${PYTHON}" -m venv /opt/venv; \
    /opt/venv/bin/python -c "import sys, venv; print(sys.version)"; \
    mkdir -p /work/project /opt/coderun; \
    chown coderun:coderun /work /work/project
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    VIRTUAL_ENV=/opt/venv \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_INPUT=1
WORKDIR /work/project
CMD ["/bin/sh"]
