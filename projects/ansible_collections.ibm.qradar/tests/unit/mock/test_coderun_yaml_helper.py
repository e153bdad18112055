"""Written for coderun's benchmark: the collection's own unit tests at this commit use no YamlTestUtils.

YamlTestUtils._dump_string dumps an object to a YAML text string (a `str` on Python 3) with the given
PyYAML Dumper class; _dump_load_cycle calls it with AnsibleDumper. (Its default, dumper=None, is passed
on to yaml.dump as Dumper=None, which PyYAML cannot call: every caller gives a dumper.)
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
def test_mapping_is_dumped_as_block_yaml_text(utils, dumper):
    out = utils._dump_string({"b": 2, "a": [1, "x"]}, dumper=dumper)
    assert isinstance(out, str)
    assert out == "a:\n- 1\n- x\nb: 2\n"


def test_sequence_and_scalars(utils):
    assert utils._dump_string([1, 2], dumper=AnsibleDumper) == "- 1\n- 2\n"
    assert utils._dump_string("hello", dumper=yaml.SafeDumper) == "hello\n...\n"
    assert utils._dump_string(None, dumper=yaml.SafeDumper) == "null\n...\n"
    assert utils._dump_string({}, dumper=yaml.SafeDumper) == "{}\n"


def test_text_round_trips_through_yaml(utils):
    obj = {"name": "qradar", "ports": [443, 8443], "enabled": True, "nested": {"k": "v: with colon"}}
    assert yaml.safe_load(utils._dump_string(obj, dumper=AnsibleDumper)) == obj


def test_the_given_dumper_is_used(utils):
    # PyYAML's full Dumper tags a tuple as a Python type; the safe one writes a plain sequence.
    assert utils._dump_string((1, 2), dumper=yaml.Dumper) == "!!python/tuple\n- 1\n- 2\n"
    assert utils._dump_string((1, 2), dumper=yaml.SafeDumper) == "- 1\n- 2\n"


def test_ansible_dumper_writes_ansible_types_as_plain_yaml(utils):
    obj = {AnsibleUnicode("key"): [AnsibleUnicode("value")]}
    assert utils._dump_string(obj, dumper=AnsibleDumper) == "key:\n- value\n"
    with pytest.raises(yaml.representer.RepresenterError):
        utils._dump_string(obj, dumper=yaml.SafeDumper)


def test_dump_load_cycle_holds(utils):
    utils._dump_load_cycle({"hosts": ["a", "b"], "vars": {"x": 1}})
    utils._dump_load_cycle(["one", {"two": 2}])
