"""Suites on disk: loading with errors that name the file and the field, a format that
reviews well and round-trips, and finding suites in several directories."""

from __future__ import annotations

import gc
import json
import math
from pathlib import Path
from typing import Any

import pytest

from pau_mcp.config import Settings
from pau_mcp.manifests import (
    ManifestError,
    ManifestStore,
    Method,
    Suite,
    SuiteInfo,
    dump_method,
    packaged_manifests,
)
from pau_mcp.manifests.checks import freeze_method
from wasm_runtime import Sandbox, outcomes_match


def method_data(method_id: str = "demo/m1", **changes: Any) -> dict[str, Any]:
    """A valid method as a file holds it; ``changes`` replace top-level fields."""
    data: dict[str, Any] = {
        "id": method_id,
        "header": "def test_func(arg0):",
        "params": ["arg0"],
        "source": ["def test_func(arg0):", "    return arg0 * 2"],
        "description": "Doubles its argument.",
        "examples": [{"input": "(2,)", "outcome": {"status": "ok", "value": "4", "value_type": "int", "encoded": 4}}],
        "tests": [
            {"input": "('ab',)", "outcome": {"status": "ok", "value": "'abab'", "value_type": "str", "encoded": "abab"}}
        ],
        "provenance": {"dataset": "demo"},
        "tags": {"arity": 1},
    }
    data.update(changes)
    return data


def write_suite(root: Path, name: str, methods: list[dict[str, Any]], info: dict[str, Any] | None = None) -> Path:
    """A suite directory written by hand: suite.json plus one raw JSON file per method (named after its id)."""
    path = root / name
    path.mkdir(parents=True)
    (path / "suite.json").write_text(json.dumps(info if info is not None else {"name": name}))
    for data in methods:
        (path / f"{data['id'].split('/', 1)[1]}.json").write_text(json.dumps(data, indent=2))
    return path


def load_error(path: Path) -> str:
    with pytest.raises(ManifestError) as info:
        Suite.load(path)
    return str(info.value)


# --- loading ----------------------------------------------------------------------------------


def test_a_suite_loads_its_methods_by_id_in_file_name_order(tmp_path: Path) -> None:
    path = write_suite(tmp_path, "demo", [method_data("demo/m2"), method_data("demo/m1"), method_data("demo/a10")])
    suite = Suite.load(path)
    assert suite.name == "demo" and suite.path == path
    assert list(suite.methods) == ["demo/a10", "demo/m1", "demo/m2"]
    assert all(isinstance(m, Method) for m in suite.methods.values())
    assert suite.method_path("demo/m1") == path / "m1.json"


def test_a_bad_file_names_the_file_and_the_field(tmp_path: Path) -> None:
    data = method_data("demo/m1")
    del data["description"]
    path = write_suite(tmp_path, "demo", [method_data("demo/good"), data])
    text = load_error(path)
    assert str(path / "m1.json") in text
    assert "description: Field required" in text


def test_a_field_of_the_wrong_type_names_the_file_and_the_field(tmp_path: Path) -> None:
    path = write_suite(tmp_path, "demo", [method_data(tags={"arity": "one"})])
    text = load_error(path)
    assert str(path / "m1.json") in text and "tags.arity:" in text and "valid integer" in text


def test_a_bad_outcome_deep_in_the_tests_is_named_by_its_position(tmp_path: Path) -> None:
    tests = [{"input": "(1,)"}, {"input": "(2,)", "outcome": {"status": "ok", "valu": "4"}}]
    path = write_suite(tmp_path, "demo", [method_data(tests=tests)])
    text = load_error(path)
    assert str(path / "m1.json") in text and "tests.1.outcome.valu" in text


def test_a_header_that_disagrees_with_params_names_the_file_and_both_fields(tmp_path: Path) -> None:
    path = write_suite(tmp_path, "demo", [method_data(header="def test_func(arg0, arg1):")])
    text = load_error(path)
    assert str(path / "m1.json") in text
    assert "header parameters ['arg0', 'arg1'] differ from params ['arg0']" in text


def test_an_arity_tag_that_disagrees_with_params_names_the_file_and_the_tag(tmp_path: Path) -> None:
    path = write_suite(tmp_path, "demo", [method_data(tags={"arity": 2})])
    text = load_error(path)
    assert str(path / "m1.json") in text and "tags.arity is 2 but there are 1 parameters" in text


def test_an_id_that_does_not_match_the_file_name_is_refused(tmp_path: Path) -> None:
    path = write_suite(tmp_path, "demo", [method_data("demo/m1")])
    (path / "m1.json").rename(path / "renamed.json")
    text = load_error(path)
    assert str(path / "renamed.json") in text and "id is 'demo/m1' but the file says demo/renamed" in text


def test_an_id_from_another_suite_is_refused(tmp_path: Path) -> None:
    path = write_suite(tmp_path, "demo", [])
    (path / "m1.json").write_text(json.dumps(method_data("other/m1")))
    assert "id is 'other/m1' but the file says demo/m1" in load_error(path)


def test_a_file_that_is_not_json_names_the_file(tmp_path: Path) -> None:
    path = write_suite(tmp_path, "demo", [])
    (path / "broken.json").write_text('{"id": "demo/broken",')
    text = load_error(path)
    assert str(path / "broken.json") in text and "Invalid JSON" in text


def test_many_problems_in_one_file_are_cut_to_five_and_counted(tmp_path: Path) -> None:
    path = write_suite(tmp_path, "demo", [])
    (path / "m1.json").write_text(json.dumps({"x1": 1, "x2": 2, "x3": 3}))
    text = load_error(path)
    assert text.count("\n  ") == 6  # five problems and the count line
    assert "... and " in text and " more" in text


def test_a_directory_without_suite_json_is_refused_when_loaded(tmp_path: Path) -> None:
    path = tmp_path / "demo"
    path.mkdir()
    (path / "m1.json").write_text(json.dumps(method_data()))
    text = load_error(path)
    assert str(path / "suite.json") in text and "missing" in text


def test_a_directory_without_suite_json_is_not_a_suite(tmp_path: Path) -> None:
    (tmp_path / "loose").mkdir()
    (tmp_path / "loose" / "m1.json").write_text(json.dumps(method_data("loose/m1")))
    write_suite(tmp_path, "demo", [method_data()])
    store = ManifestStore([tmp_path], include_packaged=False)
    assert store.names() == ["demo"]


def test_a_suite_json_naming_another_directory_is_refused(tmp_path: Path) -> None:
    path = write_suite(tmp_path, "demo", [], info={"name": "other"})
    text = load_error(path)
    assert str(path / "suite.json") in text and "name is 'other' but the directory is 'demo'" in text


def test_a_bad_suite_json_names_the_file_and_the_field(tmp_path: Path) -> None:
    path = write_suite(tmp_path, "demo", [], info={"name": "demo", "licence": "MIT"})
    text = load_error(path)
    assert str(path / "suite.json") in text and "licence" in text


# --- the file format ------------------------------------------------------------------------------


def test_load_dump_load_gives_an_equal_method(tmp_path: Path) -> None:
    path = write_suite(tmp_path, "demo", [method_data()])
    first = Suite.load(path).methods["demo/m1"]
    (path / "m1.json").write_text(dump_method(first))
    second = Suite.load(path).methods["demo/m1"]
    assert second == first
    assert dump_method(second) == dump_method(first)


@pytest.mark.parametrize(
    "source",
    [
        "def test_func(arg0):\n    return arg0 * 2",
        "def test_func(arg0):\n    return arg0 * 2\n\n\n",
        ["def test_func(arg0):", "    return arg0 * 2", "", ""],
    ],
    ids=["string without final newline", "string with blank lines at the end", "lines with blank lines at the end"],
)
def test_a_hand_written_source_round_trips_exactly(tmp_path: Path, source: str | list[str]) -> None:
    path = write_suite(tmp_path, "demo", [method_data(source=source)])
    first = Suite.load(path).methods["demo/m1"]
    assert first.source == "def test_func(arg0):\n    return arg0 * 2\n"
    (path / "m1.json").write_text(dump_method(first))
    assert Suite.load(path).methods["demo/m1"] == first


def test_dumping_twice_gives_identical_text() -> None:
    method = Method.model_validate(method_data())
    assert dump_method(method) == dump_method(method) == dump_method(Method.model_validate(method_data()))


def test_the_dump_writes_one_source_line_per_line() -> None:
    source = [
        "def test_func(arg0):",
        "    total = 0",
        "    for x in arg0:",
        "        total += x  # " + "y" * 150,
        "    return total",
    ]
    text = dump_method(Method.model_validate(method_data(source=source)))
    lines = text.splitlines()
    for line in source:
        assert f"    {json.dumps(line)}," in lines or f"    {json.dumps(line)}" in lines


def test_the_dump_writes_one_case_per_line() -> None:
    tests = [
        {"input": f"({i},)", "outcome": {"status": "ok", "value": str(2 * i), "value_type": "int", "encoded": 2 * i}}
        for i in range(5)
    ]
    text = dump_method(Method.model_validate(method_data(tests=tests)))
    lines = text.splitlines()
    for case in tests:
        assert any(line.strip().rstrip(",") == json.dumps(case) for line in lines), case
    assert len(lines) < 30


def test_a_typical_frozen_case_is_written_on_one_line() -> None:
    case = {
        "input": "('Banana',)",
        "outcome": {"status": "ok", "value": "(3, 3)", "value_type": "tuple", "encoded": {"tuple": [3, 3]}},
    }
    text = dump_method(Method.model_validate(method_data(tests=[case])))
    assert f"    {json.dumps(case)}" in text.splitlines()


def test_even_a_long_case_is_one_line_of_its_own() -> None:
    long = "x" * 200
    tests = [
        {
            "input": f"('{long}',)",
            "outcome": {"status": "ok", "value": repr(long), "value_type": "str", "encoded": long},
        },
        {"input": "('short',)", "outcome": {"status": "ok", "value": "'s'", "value_type": "str", "encoded": "s"}},
    ]
    text = dump_method(Method.model_validate(method_data(tests=tests)))
    lines = text.splitlines()
    assert f"    {json.dumps(tests[0])}," in lines
    assert f"    {json.dumps(tests[1])}" in lines


def test_the_dump_is_json_with_the_fields_in_model_order_and_no_nulls() -> None:
    text = dump_method(Method.model_validate(method_data(examples=[{"input": "(1,)"}])))
    data = json.loads(text)
    assert list(data) == [
        "id",
        "header",
        "params",
        "entry",
        "source",
        "description",
        "examples",
        "tests",
        "provenance",
        "tags",
    ]
    assert data["examples"] == [{"input": "(1,)"}]
    assert "null" not in text
    assert text.endswith("}\n")


def test_every_builtin_file_is_exactly_what_dump_method_writes() -> None:
    suite = ManifestStore(include_packaged=True).suite("builtin")
    assert len(suite.methods) >= 60
    for method in suite.methods.values():
        assert suite.method_path(method.id).read_text(encoding="utf-8") == dump_method(method), method.id


def test_frozen_values_keep_their_python_types_through_the_file(tmp_path: Path, sandbox: Sandbox) -> None:
    source = [
        "def test_func(arg0):",
        "    if arg0 == 'tuple':",
        "        return (1, ('a', 2.5))",
        "    if arg0 == 'dict':",
        "        return {1: 'one', 2: (3, 4), (5, 6): [7]}",
        "    if arg0 == 'odd':",
        "        return [{3, 1}, frozenset({2}), b'\\x00x', 2 ** 70, float('nan'), -0.0, None]",
        "    raise KeyError(arg0)",
    ]
    draft = Method.model_validate(
        method_data(
            source=source,
            examples=[{"input": "('tuple',)"}, {"input": "('dict',)"}],
            tests=[{"input": "('odd',)"}, {"input": "('x',)"}],
        )
    )
    suite = Suite.create(tmp_path, SuiteInfo(name="demo"))
    suite.save(freeze_method(draft, sandbox))
    loaded = Suite.load(tmp_path / "demo").methods["demo/m1"]
    as_tuple, as_dict = (case.frozen_outcome().outcome().decoded() for case in loaded.examples)
    odd = loaded.tests[0].frozen_outcome().outcome().decoded()
    assert as_tuple == (1, ("a", 2.5)) and type(as_tuple) is tuple and type(as_tuple[1]) is tuple
    assert as_dict == {1: "one", 2: (3, 4), (5, 6): [7]} and all(type(k) in (int, tuple) for k in as_dict)
    assert type(as_dict[2]) is tuple and type(as_dict[(5, 6)]) is list
    assert type(odd[0]) is set and type(odd[1]) is frozenset and odd[2] == b"\x00x" and odd[3] == 2**70
    assert math.isnan(odd[4]) and math.copysign(1, odd[5]) == -1 and odd[6] is None
    assert loaded.tests[1].frozen_outcome().error_type == "KeyError"
    again = sandbox.run(loaded.source, [c.input for c in (*loaded.examples, *loaded.tests)], fresh=True)
    for case, outcome in zip((*loaded.examples, *loaded.tests), again, strict=False):
        assert outcomes_match(case.frozen_outcome().outcome(), outcome), case.input
    assert loaded == suite.methods["demo/m1"]


# --- saving and creating ------------------------------------------------------------------------


def test_saving_writes_the_dump_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    suite = Suite.create(tmp_path, SuiteInfo(name="demo", description="d"))
    method = Method.model_validate(method_data())
    target = suite.save(method)
    assert target == tmp_path / "demo" / "m1.json"
    assert target.read_text() == dump_method(method)
    assert sorted(p.name for p in (tmp_path / "demo").iterdir()) == ["m1.json", "suite.json"]
    assert suite.methods["demo/m1"] == method
    assert Suite.load(tmp_path / "demo").info == SuiteInfo(name="demo", description="d")


def test_a_suite_refuses_to_save_another_suites_method(tmp_path: Path) -> None:
    suite = Suite.create(tmp_path, SuiteInfo(name="demo"))
    with pytest.raises(ManifestError, match="does not belong to suite demo"):
        suite.save(Method.model_validate(method_data("other/m1")))


def test_creating_over_an_existing_suite_needs_replace(tmp_path: Path) -> None:
    write_suite(tmp_path, "demo", [method_data()])
    with pytest.raises(ManifestError, match="already exists"):
        Suite.create(tmp_path, SuiteInfo(name="demo"))
    assert (tmp_path / "demo" / "m1.json").exists()
    Suite.create(tmp_path, SuiteInfo(name="demo"), replace=True)
    assert sorted(p.name for p in (tmp_path / "demo").iterdir()) == ["suite.json"]


# --- finding suites -------------------------------------------------------------------------------


def test_the_store_finds_suites_in_every_directory_and_the_packaged_one(tmp_path: Path) -> None:
    write_suite(tmp_path / "a", "alpha", [method_data("alpha/m1")])
    write_suite(tmp_path / "b", "beta", [method_data("beta/m1")])
    store = ManifestStore([tmp_path / "a", tmp_path / "b"])
    assert store.names() == ["alpha", "beta", "builtin"]
    assert store.dirs[-1] == packaged_manifests()
    assert [m.id for m in store.methods(["beta", "alpha"])] == ["beta/m1", "alpha/m1"]
    assert store.method("alpha/m1").id == "alpha/m1"
    assert store.writable_root() == tmp_path / "a"
    assert ManifestStore([tmp_path / "a"], include_packaged=False).names() == ["alpha"]


def test_a_manifests_directory_that_does_not_exist_is_an_error_naming_the_flag(tmp_path: Path) -> None:
    write_suite(tmp_path / "a", "alpha", [method_data("alpha/m1")])
    store = ManifestStore([tmp_path / "a", tmp_path / "missing"])
    for look in (store.names, lambda: store.suite("alpha"), lambda: store.method("builtin/b001")):
        with pytest.raises(ManifestError) as info:
            look()
        message = str(info.value)
        assert "--manifests / PAU_MCP_MANIFESTS" in message and str(tmp_path / "missing") in message
        assert "does not exist" in message
    (tmp_path / "file").write_text("")
    with pytest.raises(ManifestError, match="is a file"):
        ManifestStore([tmp_path / "file"]).names()


def test_new_suites_go_into_the_first_manifests_directory_created_if_missing(tmp_path: Path) -> None:
    store = ManifestStore([tmp_path / "new" / "suites"])
    assert store.writable_root() == tmp_path / "new" / "suites"
    assert (tmp_path / "new" / "suites").is_dir() and store.names() == ["builtin"]
    with pytest.raises(ManifestError, match="does not exist"):
        ManifestStore([tmp_path / "new2", tmp_path / "missing"]).writable_root()


def test_new_suites_never_go_into_the_packaged_suites(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="--manifests DIR or set PAU_MCP_MANIFESTS"):
        ManifestStore().writable_root()


def test_a_loaded_suite_is_kept(tmp_path: Path) -> None:
    write_suite(tmp_path, "demo", [method_data()])
    store = ManifestStore([tmp_path], include_packaged=False)
    assert store.suite("demo") is store.suite("demo")


def test_an_unknown_suite_lists_the_known_ones(tmp_path: Path) -> None:
    write_suite(tmp_path, "demo", [method_data()])
    with pytest.raises(ManifestError) as info:
        ManifestStore([tmp_path]).suite("dmeo")
    assert "no suite named 'dmeo' (known: builtin, demo)" in str(info.value) and "--manifests" in str(info.value)


def test_an_unknown_method_names_its_suite(tmp_path: Path) -> None:
    write_suite(tmp_path, "demo", [method_data()])
    with pytest.raises(ManifestError, match="suite 'demo' has no method 'demo/nope'"):
        ManifestStore([tmp_path]).method("demo/nope")


def test_the_same_suite_name_in_two_directories_is_an_error_naming_both(tmp_path: Path) -> None:
    first = write_suite(tmp_path / "a", "demo", [method_data()])
    second = write_suite(tmp_path / "b", "demo", [method_data()])
    store = ManifestStore([tmp_path / "a", tmp_path / "b"])
    with pytest.raises(ManifestError) as info:
        store.suite("demo")
    assert "suite 'demo' exists twice" in str(info.value)
    assert str(first) in str(info.value) and str(second) in str(info.value)


def test_a_suite_named_like_a_packaged_one_is_an_error(tmp_path: Path) -> None:
    write_suite(tmp_path, "builtin", [method_data("builtin/m1")])
    with pytest.raises(ManifestError, match="suite 'builtin' exists twice"):
        ManifestStore([tmp_path]).names()


def test_the_same_directory_given_twice_is_not_a_duplicate(tmp_path: Path) -> None:
    write_suite(tmp_path / "root", "demo", [method_data()])
    (tmp_path / "link").symlink_to(tmp_path / "root")
    store = ManifestStore([tmp_path / "root", tmp_path / "link", tmp_path / "root"], include_packaged=False)
    assert store.names() == ["demo"]
    assert store.suite("demo").path.resolve() == (tmp_path / "root" / "demo").resolve()


def test_the_manifests_variable_takes_several_directories_separated_by_colons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_suite(tmp_path / "a", "alpha", [method_data("alpha/m1")])
    write_suite(tmp_path / "b", "beta", [method_data("beta/m1")])
    monkeypatch.setenv("PAU_MCP_MANIFESTS", f"{tmp_path / 'a'}:{tmp_path / 'b'}")
    settings = Settings.from_env()
    assert settings.manifests == (tmp_path / "a", tmp_path / "b")
    assert ManifestStore(settings.manifests).names() == ["alpha", "beta", "builtin"]
    assert (
        ManifestStore(settings.manifests).names()
        == ManifestStore(Settings.from_options(manifests=(tmp_path / "a", tmp_path / "b")).manifests).names()
    )


def test_loading_leaves_the_garbage_collector_as_it_found_it(tmp_path: Path) -> None:
    good = write_suite(tmp_path, "demo", [method_data()])
    bad = write_suite(tmp_path, "bad", [method_data("bad/m1", tags={"arity": 5})])
    assert gc.isenabled()
    Suite.load(good)
    assert gc.isenabled()
    with pytest.raises(ManifestError):
        Suite.load(bad)
    assert gc.isenabled()
    gc.disable()
    try:
        Suite.load(good)
        assert not gc.isenabled()
    finally:
        gc.enable()
