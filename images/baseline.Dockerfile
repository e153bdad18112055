# Baseline layer: the project's tests run once, as `coderun`, on a scratch copy of /work/project (so the
# tree in the image stays pristine). baseline.sh writes the JUnit report, the output and the exit code
# to /tmp/coderun-baseline/out; they are kept, read-only, in /opt/coderun/baseline/, from where coderun
# reads them back out of the image.
ARG BASE
FROM ${BASE}
COPY baseline.sh /opt/coderun/baseline.sh
COPY harness/ /opt/coderun/harness/
USER coderun
RUN sh /opt/coderun/baseline.sh
USER root
RUN set -eux; \
    mkdir -p /opt/coderun/baseline; \
    cp /tmp/coderun-baseline/out/* /opt/coderun/baseline/; \
    rm -rf /tmp/coderun-baseline; \
    chown -R root:root /opt/coderun/baseline; chmod -R a+rX,go-w /opt/coderun/baseline; \
    echo "baseline exit code: $(cat /opt/coderun/baseline/exit_code)"
# No answer key in the containers samples run in (coderun's issue 34): the project's own modules that an
# install of the project put in the venv are deleted (installed.py), and the pristine tree moves where only
# root can read it. coderun reads it through the engine's archive API, outside every container, and gives each
# sample a copy with the sample's function in place of the original.
COPY installed.py /opt/coderun/installed.py
RUN set -eux; \
    /opt/venv/bin/python /opt/coderun/installed.py "${PYTHONPATH}" --delete; \
    mv /work/project /opt/coderun/pristine; \
    chown root:root /opt/coderun/pristine; chmod 700 /opt/coderun/pristine; \
    mkdir /work/project; chown coderun:coderun /work/project
USER coderun
WORKDIR /work/project
