"""force_string, written for coderun's benchmark from its docstring and its caller in o2graph_plotter.

HDF5 attributes read through h5py come back as numpy.bytes_ or bytes; force_string turns those into str
(UTF-8). What the docstring leaves open is not tested: other objects (passed through, or made text), a
bytearray, and bytes that are not UTF-8.
"""

import numpy

from o2sclpy.utils import force_string


def test_bytes_are_decoded_as_utf8():
    assert force_string(b"double") == "double"
    assert isinstance(force_string(b"double"), str)
    assert force_string("h\u00e9".encode("utf-8")) == "h\u00e9"
    assert force_string(b"") == ""


def test_numpy_bytes_are_decoded():
    value = numpy.bytes_(b"table3d")
    out = force_string(value)
    assert out == "table3d"
    assert type(out) is str
    assert force_string(numpy.array([b"int"])[0]) == "int"


def test_str_is_returned_as_is():
    text = "already a string"
    assert force_string(text) is text
    assert force_string(numpy.str_("np")) == "np"
