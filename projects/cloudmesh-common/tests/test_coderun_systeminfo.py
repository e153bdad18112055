"""coderun's tests of cloudmesh.common.systeminfo.os_is_mac in both configurations it tells apart.

The project's own tests call it only on the machine they run on (Linux here), where a body that always
answers False would pass. Written for the benchmark from the docstring ("Checks if the os is macOS"). Which
of the standard library's ways of asking a body uses the docstring does not say, so each operating system is
faked through all of them at once: platform.system(), platform.uname(), platform.mac_ver(), os.uname() and
sys.platform.
"""

import collections
import os
import platform
import sys

import pytest
from cloudmesh.common import systeminfo

SYSTEMS = [("Darwin", "darwin", True), ("Linux", "linux", False), ("Windows", "win32", False)]
Uname = collections.namedtuple("Uname", "system node release version machine processor")
OsUname = collections.namedtuple("OsUname", "sysname nodename release version machine")


def _fake(monkeypatch, system, sys_platform):
    mac = system == "Darwin"
    monkeypatch.setattr(platform, "system", lambda: system)
    monkeypatch.setattr(platform, "uname", lambda: Uname(system, "box", "1.0", "v1", "x86_64", "x86_64"))
    monkeypatch.setattr(platform, "mac_ver",
                        lambda *a, **k: ("13.0", ("", "", ""), "x86_64") if mac else ("", ("", "", ""), ""))
    monkeypatch.setattr(os, "uname", lambda: OsUname(system, "box", "1.0", "v1", "x86_64"))
    monkeypatch.setattr(sys, "platform", sys_platform)


@pytest.mark.parametrize("system,sys_platform,expected", SYSTEMS)
def test_os_is_mac(monkeypatch, system, sys_platform, expected):
    _fake(monkeypatch, system, sys_platform)
    assert systeminfo.os_is_mac() is expected


def test_os_is_mac_agrees_with_the_real_platform():
    assert systeminfo.os_is_mac() is (platform.system() == "Darwin")
