"""Written for coderun's benchmark: the collection's own unit tests at this commit use no YamlTestUtils.

YamlTestUtils._dump_string dumps an object to a YAML text string ("a py2-unicode or py3-string": a `str` on
Python 3) with the given PyYAML Dumper class; _dump_load_cycle calls it with AnsibleDumper. How the YAML is
laid out (block or flow style, document end markers) the docstring does not say: the text is read back,
not compared. (The default, dumper=None, is passed on to yaml.dump as Dumper=None, which PyYAML cannot
call: every caller gives a dumper.)
"""

import unittest

import pytest
import yaml
from ansible.parsing.yaml.dumper import AnsibleDumper
from ansible.parsing.yaml.objects import AnsibleUnicode

from .yaml_helper import YamlTestUtils


class _Utils(YamlTestUtils, unittest.TestCase):
    def runTest(self):  # a TestCase needs a test method to be instantiated
        pass


@pytest.fixture
def utils():
    return _Utils()


@pytest.mark.parametrize("dumper", [yaml.Dumper, yaml.SafeDumper, AnsibleDumper])
@pytest.mark.parametrize("obj", [{"b": 2, "a": [1, "x"]}, [1, 2], "hello", None, {},
                                 {"name": "qradar", "ports": [443, 8443], "enabled": True,
                                  "nested": {"k": "v: with colon"}}])
def test_objects_are_dumped_as_yaml_text(utils, dumper, obj):
    out = utils._dump_string(obj, dumper=dumper)
    assert isinstance(out, str)
    assert yaml.safe_load(out) == obj


def test_the_given_dumper_is_used(utils):
    # PyYAML's full Dumper tags a tuple as a Python type; the safe one writes a plain sequence.
    assert "!!python/tuple" in utils._dump_string((1, 2), dumper=yaml.Dumper)
    safe = utils._dump_string((1, 2), dumper=yaml.SafeDumper)
    assert "!!" not in safe and yaml.safe_load(safe) == [1, 2]


def test_ansible_dumper_writes_ansible_types_as_plain_yaml(utils):
    obj = {AnsibleUnicode("key"): [AnsibleUnicode("value")]}
    out = utils._dump_string(obj, dumper=AnsibleDumper)
    assert "!!" not in out and yaml.safe_load(out) == {"key": ["value"]}
    with pytest.raises(yaml.representer.RepresenterError):
        utils._dump_string(obj, dumper=yaml.SafeDumper)


def test_dump_load_cycle_holds(utils):
    utils._dump_load_cycle({"hosts": ["a", "b"], "vars": {"x": 1}})
    utils._dump_load_cycle(["one", {"two": 2}])
