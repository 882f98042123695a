"""The engine rule: a function runs in the numpy engine when its source imports numpy, pandas or scipy."""

from __future__ import annotations

import pytest

from wasm_runtime.engines import engine_for, imported_packages


@pytest.mark.parametrize(
    ("source", "engine"),
    [
        ("import numpy as np\ndef test_func(x):\n    return np.sum(x)", "numpy"),
        ("from scipy import stats\ndef test_func(x):\n    return 1", "numpy"),
        ("def test_func(x):\n    import pandas.api.types\n    return 1", "numpy"),
        ("def test_func(x):\n    return __import__('numpy').zeros(x)", "numpy"),
        ("import importlib\ndef test_func(x):\n    return importlib.import_module('scipy.special')", "numpy"),
        ("import math, os.path\ndef test_func(x):\n    return math.sqrt(x)", "python"),
        ("# uses numpy-like broadcasting\ndef test_func(x):\n    return 'import numpy'", "python"),
        ("from . import numpy\ndef test_func(x):\n    return x", "python"),
        ("def test_func(x) return x", "python"),
    ],
)
def test_the_engine_follows_what_the_source_imports(source: str, engine: str) -> None:
    assert engine_for(source) == engine


def test_a_pinned_engine_wins_and_an_unknown_one_is_refused() -> None:
    assert engine_for("def test_func():\n    return 1", "numpy") == "numpy"
    assert engine_for("import numpy\ndef test_func():\n    return 1", "python") == "python"
    with pytest.raises(ValueError, match="the engines are python, numpy"):
        engine_for("def test_func():\n    return 1", "jax")


def test_imported_packages_are_top_level_names() -> None:
    assert imported_packages("import numpy.linalg\nfrom pandas.io import json\nimport re") == {"numpy", "pandas", "re"}
