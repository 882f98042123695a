"""A function's own source: the function and the module-level code it reaches, nothing a sibling alone uses, and
code that still runs the same in the sandbox."""

from __future__ import annotations

import pytest

from pau_mcp.manifests.importers import CannotAnonymise, slice_function
from wasm_runtime import Sandbox

MODULE = '''"""Four functions: one imports os, one calls another."""
from __future__ import annotations

import math
import os

LIMIT = 10
TABLE = {}
TABLE["bonus"] = LIMIT * 2
COUNT = 0


def here(x):
    return os.sep + str(x)


def double(x):
    return x * 2


def quadruple(x: int) -> int:
    return double(double(x)) + TABLE["bonus"]


def circle(r):
    return round(math.pi * r * r, 2)


def bump():
    global COUNT
    COUNT += 1
    return COUNT


if __name__ == "__main__":
    print(quadruple(2))
'''


def test_a_function_keeps_only_the_helpers_constants_and_imports_it_reaches(sandbox: Sandbox) -> None:
    cut = slice_function(MODULE, "quadruple")
    assert cut.kept == ("LIMIT", "TABLE", "double")
    assert "def double(" in cut.source and 'TABLE["bonus"] = LIMIT * 2' in cut.source.replace("'", '"')
    for sibling in ("def here", "def circle", "def bump", "import os", "import math", "__main__", "COUNT"):
        assert sibling not in cut.source
    assert set(cut.left_out) == {"math", "os", "COUNT", "here", "circle", "bump"}
    assert sandbox.run(cut.source, ["(3,)"], entry="quadruple")[0].value == "32"


def test_an_import_goes_only_with_the_functions_that_use_it() -> None:
    assert "import os" in slice_function(MODULE, "here").source
    assert "import math" in slice_function(MODULE, "circle").source
    for name in ("double", "quadruple", "circle", "bump"):
        assert "import os" not in slice_function(MODULE, name).source, name


def test_a_global_a_function_assigns_comes_with_it_and_future_imports_always_stay(sandbox: Sandbox) -> None:
    cut = slice_function(MODULE, "bump")
    assert cut.kept == ("COUNT",) and cut.source.startswith("from __future__ import annotations")
    assert sandbox.run(cut.source, ["()"], entry="bump")[0].value == "1"


def test_a_helper_reached_through_another_and_a_changing_statement_are_kept(sandbox: Sandbox) -> None:
    source = (
        "RULES = []\n\ndef rule(f):\n    RULES.append(f)\n    return f\n\n@rule\ndef positive(x):\n    return x > 0\n\n"
        "def unrelated():\n    return 1\n\ndef check(x):\n    return all(r(x) for r in RULES)\n"
    )
    cut = slice_function(source, "check")
    assert "def positive" in cut.source and "def rule" in cut.source and "def unrelated" not in cut.source
    assert [o.value for o in sandbox.run(cut.source, ["(1,)", "(-1,)"], entry="check")] == ["True", "False"]


def test_code_that_reads_globals_or_eval_keeps_the_whole_module() -> None:
    source = "import os\n\ndef helper():\n    return 2\n\ndef f():\n    return globals()['helper']()\n"
    cut = slice_function(source, "f")
    assert cut.whole and "def helper" in cut.source and "import os" in cut.source


def test_a_star_import_stays_when_a_name_comes_from_nowhere_else() -> None:
    source = "from math import *\nimport os\n\ndef f(x):\n    return floor(x)\n\ndef g(x):\n    return x\n"
    assert "from math import *" in slice_function(source, "f").source
    assert "from math import *" not in slice_function(source, "g").source


def test_a_module_whose_statements_are_all_reached_is_returned_as_written() -> None:
    source = "# a comment\nimport math\n\ndef f(x):\n    return math.floor(x)  # rounding down\n"
    assert slice_function(source, "f").source == source


def test_a_source_that_does_not_parse_or_lacks_the_function_cannot_be_sliced() -> None:
    with pytest.raises(CannotAnonymise, match="does not parse"):
        slice_function("def f(:\n", "f")
    with pytest.raises(CannotAnonymise, match="no top-level function 'g'"):
        slice_function("def f():\n    return 1\n", "g")


def test_a_local_that_shadows_a_module_level_name_does_not_bring_it_along() -> None:
    source = "x = 5\nimport os\n\ndef g(x):\n    os = x + 1\n    return os\n"
    cut = slice_function(source, "g")
    assert cut.kept == () and cut.left_out == ("x", "os")


def test_a_load_time_call_of_a_function_that_changes_what_the_entry_reads_is_kept() -> None:
    source = (
        "TABLE = {}\n\ndef fill():\n    TABLE['a'] = 1\n\ndef other():\n    return 2\n\nfill()\nother()\n\n"
        "def f():\n    return TABLE['a']\n"
    )
    cut = slice_function(source, "f")
    assert "fill()" in cut.source and "other()" not in cut.source and "def other" not in cut.source
