#!/usr/bin/env bash
# Make a Docker engine answer on this machine, for the docker-marked tests and `coderun images build`.
# Idempotent: does nothing when an engine already answers. Installs docker.io and debootstrap from
# Debian's packages when missing, then starts dockerd without a bridge network (containers here always
# run with networking disabled) and waits until it answers.
set -euo pipefail

LOG="${DOCKERD_LOG:-/var/log/coderun-dockerd.log}"
WAIT="${DOCKERD_WAIT:-60}"

engine_answers() { docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

if engine_answers; then
    echo "docker-setup: engine already answers ($(docker version --format '{{.Server.Version}}'))"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ "${#missing[@]}" -gt 0 ]; then
    echo "docker-setup: installing ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
    echo "docker-setup: starting dockerd (log: $LOG)"
    # shellcheck disable=SC2086
    # setsid: the engine must not die with the process group of whatever started it (a CI step, a test).
    $SUDO setsid sh -c "nohup dockerd --bridge=none --iptables=false >>'$LOG' 2>&1 &" </dev/null
fi

for _ in $(seq "$WAIT"); do
    if engine_answers; then
        echo "docker-setup: engine answers ($(docker version --format '{{.Server.Version}}'))"
        exit 0
    fi
    sleep 1
done
echo "docker-setup: dockerd did not answer within ${WAIT}s; last lines of $LOG:" >&2
tail -n 30 "$LOG" >&2 || true
exit 1
