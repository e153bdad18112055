"""coderun's tests of cloudmesh.common.systeminfo.os_is_mac in both configurations it tells apart.

The project's own tests call it only on the machine they run on (Linux here), where a body that always
answers False would pass. Written for the benchmark from the docstring ("Checks if the os is macOS") and
its siblings os_is_windows/os_is_linux, which ask platform.system(); the platform is faked consistently
(platform.system() and sys.platform) for each operating system.
"""

import platform
import sys

import pytest
from cloudmesh.common import systeminfo

SYSTEMS = [("Darwin", "darwin", True), ("Linux", "linux", False), ("Windows", "win32", False)]


@pytest.mark.parametrize("system,sys_platform,expected", SYSTEMS)
def test_os_is_mac(monkeypatch, system, sys_platform, expected):
    monkeypatch.setattr(platform, "system", lambda: system)
    monkeypatch.setattr(sys, "platform", sys_platform)
    assert systeminfo.os_is_mac() is expected


def test_os_is_mac_agrees_with_the_real_platform():
    assert systeminfo.os_is_mac() is (platform.system() == "Darwin")
