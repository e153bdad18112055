"""coderun's tests of cloudmesh.common.util's is_local and is_gitbash.

Written for the benchmark from the functions' docstrings: is_local tells whether a host name or address is
the local host (the loopback address, "localhost", or this machine's own names); is_gitbash whether Python
runs in a Windows Git Bash. How a body finds out the docstrings do not say, so the machine is faked through
the usual ways at once: its names and a resolver (no network in the sandbox) for is_local, and for
is_gitbash a whole Git Bash environment (Windows, MSYSTEM, EXEPATH into the Git folder, bash as the shell).
The project's own tests run neither on a Linux machine. Every is_local test fakes the machine: the original
asks the resolver for its own host name, which a container without a network cannot answer.
"""

import platform
import socket
import sys

import pytest
from cloudmesh.common import util

ADDRESSES = {"localhost": "127.0.0.1", "box": "192.0.2.7", "box.example.org": "192.0.2.7",
             "www.example.org": "203.0.113.5", "box2": "192.0.2.9", "": "0.0.0.0"}


@pytest.fixture
def box(monkeypatch):
    """This machine is `box` (box.example.org, 192.0.2.7); names resolve without a network."""
    def resolve(name):
        if name in ADDRESSES or name.replace(".", "").isdigit():
            return ADDRESSES.get(name, name)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "gethostname", lambda: "box")
    monkeypatch.setattr(socket, "getfqdn", lambda name="": "box.example.org" if name in ("", "box") else name)
    monkeypatch.setattr(platform, "node", lambda: "box")
    monkeypatch.setattr(socket, "gethostbyaddr", lambda name: ("box.example.org", ["box"], ["192.0.2.7"]))
    monkeypatch.setattr(socket, "gethostbyname", resolve)
    monkeypatch.setattr(socket, "gethostbyname_ex", lambda name: (name, [], [resolve(name)]))
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, *a, **k: [
        (socket.AF_INET, socket.SOCK_STREAM, 6, "", (resolve(host), 0))])


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_loopback_is_local(box, host):
    assert util.is_local(host) is True


def test_own_host_name_is_local(box):
    assert util.is_local(socket.gethostname()) is True
    assert util.is_local(platform.node()) is True


def test_other_hosts_are_not_local(box):
    for host in ["192.0.2.1", "www.example.org", "box2"]:
        assert util.is_local(host) is False, host


def test_fully_qualified_own_name_is_local(box):
    assert util.is_local("box") is True
    assert util.is_local("box.example.org") is True


def _gitbash(monkeypatch, exepath):
    """Python in Git for Windows' bash: what that shell sets, as far as it can be set on this machine."""
    for name, value in {"EXEPATH": exepath, "MSYSTEM": "MINGW64", "SHELL": "/usr/bin/bash",
                        "TERM_PROGRAM": "mintty", "OS": "Windows_NT"}.items():
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    monkeypatch.setattr(platform, "system", lambda: "Windows")
    monkeypatch.setattr(sys, "platform", "win32")


@pytest.mark.parametrize("exepath", [r"C:\Program Files\Git", r"C:\Users\me\AppData\Local\Programs\Git"])
def test_gitbash(monkeypatch, exepath):
    _gitbash(monkeypatch, exepath)
    assert util.is_gitbash() is True


def test_not_gitbash_on_this_machine(monkeypatch):
    for name in ("EXEPATH", "MSYSTEM", "TERM_PROGRAM"):
        monkeypatch.delenv(name, raising=False)
    assert util.is_gitbash() is False
