"""TestDummyDoubleMonochromator.gaussian, tested for coderun's benchmark from its docstring and its caller.

test_monochromator.py cannot be imported at this commit (its device classes define __init__, which
concert.base.AsyncType rejects since the async port), so its test_center never runs. This file compiles the
module's imports and the one method from test_monochromator.py as it stands (a sample spliced into it
included), keeping the file name and line numbers, and checks what test_center relies on: a Gaussian
profile over the motor position in degrees, centred at 0.2 with sigma 0.1, i.e. exp(-(x - 0.2)**2 / 0.1**2).
"""

import ast
from pathlib import Path

import numpy as np
import pytest

SOURCE = Path(__file__).with_name("test_monochromator.py")


@pytest.fixture(scope="module")
def gaussian():
    tree = ast.parse(SOURCE.read_text(), str(SOURCE))
    imports = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    cls = next(node for node in tree.body
               if isinstance(node, ast.ClassDef) and node.name == "TestDummyDoubleMonochromator")
    method = next(node for node in cls.body if isinstance(node, ast.FunctionDef) and node.name == "gaussian")
    namespace = {}
    exec(compile(ast.Module(body=imports + [method], type_ignores=[]), str(SOURCE), "exec"), namespace)
    return lambda x: namespace["gaussian"](None, x)


def test_peak_is_one_at_the_centre(gaussian):
    assert gaussian(0.2) == pytest.approx(1.0)


def test_width_is_sigma_0_1(gaussian):
    assert gaussian(0.3) == pytest.approx(np.exp(-1.0))
    assert gaussian(0.1) == pytest.approx(np.exp(-1.0))
    assert gaussian(0.4) == pytest.approx(np.exp(-4.0))
    assert gaussian(-0.8) == pytest.approx(np.exp(-100.0))


def test_symmetric_about_the_centre(gaussian):
    for d in (0.05, 0.17, 0.5):
        assert gaussian(0.2 + d) == pytest.approx(gaussian(0.2 - d))


def test_works_elementwise_on_arrays(gaussian):
    x = np.linspace(-0.5, 0.5, 101)
    y = gaussian(x)
    assert y.shape == x.shape
    assert x[np.argmax(y)] == pytest.approx(0.2)
    np.testing.assert_allclose(y, np.exp(-(x - 0.2) ** 2 / 0.01))
    assert np.all((y > 0) & (y <= 1))
