"""coderun's tests of cloudmesh.common.util's is_local and is_gitbash.

Written for the benchmark from the functions' docstrings: is_local tells whether a host name or address is
this machine (the loopback address, "localhost", or this host's own names); is_gitbash whether Python runs
in a Windows Git Bash, which that shell tells through the EXEPATH variable pointing into the Git folder.
The project's own tests run neither on a Linux machine.
"""

import platform
import socket

import pytest
from cloudmesh.common import util


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_loopback_is_local(host):
    assert util.is_local(host) is True


def test_own_host_name_is_local():
    assert util.is_local(socket.gethostname()) is True
    assert util.is_local(platform.node()) is True


def test_other_hosts_are_not_local(monkeypatch):
    monkeypatch.setattr(socket, "gethostname", lambda: "box")
    monkeypatch.setattr(platform, "node", lambda: "box")
    monkeypatch.setattr(socket, "gethostbyaddr", lambda name: ("box.example.org", [], ["192.0.2.7"]))
    for host in ["192.0.2.1", "www.example.org", "box2", ""]:
        assert util.is_local(host) is False, host


def test_fully_qualified_own_name_is_local(monkeypatch):
    monkeypatch.setattr(socket, "gethostname", lambda: "box")
    monkeypatch.setattr(platform, "node", lambda: "box")
    monkeypatch.setattr(socket, "gethostbyaddr", lambda name: ("box.example.org", [], ["192.0.2.7"]))
    assert util.is_local("box") is True
    assert util.is_local("box.example.org") is True


@pytest.mark.parametrize("exepath", [r"C:\Program Files\Git", r"C:\Users\me\AppData\Local\Programs\Git\bin"])
def test_gitbash_when_exepath_is_in_git(monkeypatch, exepath):
    monkeypatch.setenv("EXEPATH", exepath)
    assert util.is_gitbash() is True


def test_not_gitbash_when_exepath_is_elsewhere(monkeypatch):
    monkeypatch.setenv("EXEPATH", r"C:\Windows\System32")
    assert util.is_gitbash() is False


def test_not_gitbash_without_exepath(monkeypatch):
    monkeypatch.delenv("EXEPATH", raising=False)
    assert util.is_gitbash() is False
