"""The benchmark's supplementary tests (projects/<name>/...) check only what their targets' docstrings promise:
a body written from the docstring alone, another reading than the original's, passes them. Each case runs the
real test file with pytest against a stand-in module holding such a body (no project environment needed)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # a venv, a sandbox or a project's tests in every test

PROJECTS = Path(__file__).resolve().parents[1] / "projects"

GOPAD_REST = '''
import ipaddress


def is_ipv4(target):
    """Test if IPv4 address or not (None is not a string: it raises, as ipaddress does)."""
    if not isinstance(target, str):
        raise TypeError("an address is a string")
    try:
        ipaddress.IPv4Address(target)
    except ValueError:
        return False
    return True


def in_ipv4net(target, net):
    return ipaddress.IPv4Address(target) in ipaddress.IPv4Network(net)


def should_bypass_proxies(url, no_proxy=None):
    raise NotImplementedError


class RESTClientObject:
    pass
'''

CONCERT_MONOCHROMATOR = '''
import numpy as np


class TestDummyDoubleMonochromator:
    def gaussian(self, x):
        """Gaussian centered around 0.2 with a sigma of 0.1 (the normalised density)."""
        mu, sigma = 0.2, 0.1
        return np.exp(-(x - mu) ** 2 / (2 * sigma ** 2)) / (sigma * np.sqrt(2 * np.pi))
'''

O2SCLPY_UTILS = '''
import numpy


def force_string(obj):
    """Bytes (numpy's too) as UTF-8 text; anything else made text as well."""
    if isinstance(obj, (bytes, bytearray, numpy.bytes_)):
        return bytes(obj).decode("utf-8", errors="replace")
    return obj if isinstance(obj, str) else str(obj)
'''

PYSOLBASE_FILEUTILITY = '''
import os


class FileUtility:
    """Written from the docstrings alone (the original checks types, logs and reads through codecs)."""

    @staticmethod
    def is_file_exist(file_name):
        """True (exist), false (do not exist, or invalid file name)."""
        return isinstance(file_name, str) and os.path.isfile(file_name)

    @staticmethod
    def file_to_textbuffer(file_name, encoding):
        """A text buffer read with the encoding, or None in case of error."""
        try:
            with open(file_name, encoding=encoding) as f:
                return f.read()
        except (OSError, ValueError):
            return None

    @staticmethod
    def append_text_to_file(file_name, text_buffer, encoding, overwrite=False):
        """The number of characters written, or lt 0 if error."""
        try:
            with open(file_name, "w" if overwrite else "a", encoding=encoding) as f:
                return f.write(text_buffer)
        except (OSError, ValueError):
            return -1
'''

# (supplementary test file, files of the stand-in tree, pytest -k selection or "")
CASES = {
    "gopad is_ipv4 raising on None": ("gopad-python/test/test_coderun_rest.py",
                                      {"gopad/__init__.py": "", "gopad/rest.py": GOPAD_REST,
                                       "gopad/configuration.py": "class Configuration:\n    pass\n"},
                                      "TestIsIpv4"),
    "concert gaussian as the normalised density": (
        "concert/concert/tests/unit/devices/test_coderun_monochromator.py",
        {"test_monochromator.py": CONCERT_MONOCHROMATOR}, ""),
    "o2sclpy force_string making everything text": (
        "o2sclpy/tests/test_coderun_utils.py", {"o2sclpy/__init__.py": "", "o2sclpy/utils.py": O2SCLPY_UTILS}, ""),
    "pysolbase FileUtility through open() alone": (
        "pysolbase/pysolbase_test/test_coderun_fileutility.py",
        {"pysolbase/__init__.py": "", "pysolbase/FileUtility.py": PYSOLBASE_FILEUTILITY}, ""),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_body_written_from_the_docstring_alone_passes_the_supplementary_test(case, tmp_path):
    """gopad `is_ipv4`'s test required `is_ipv4(None) is False`, which its docstring ("Test if IPv4 address or
    not") does not promise: 9 CodeGen samples failed on that test alone."""
    test_file, tree, selection = CASES[case]
    for rel, text in tree.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    shutil.copy(PROJECTS / test_file, tmp_path / Path(test_file).name)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "--rootdir",
           str(tmp_path), Path(test_file).name, *(["-k", selection] if selection else [])]
    out = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1"})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and "failed" not in out.stdout
