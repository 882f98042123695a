"""One settings object: every PAU_* variable has a flag, flags beat variables, bad values name both."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pau_mcp.config import SETTINGS, Settings, SettingsError
from pau_mcp.sandboxing import sandbox_limits

ROOT = Path(__file__).resolve().parents[2]


def test_every_pau_variable_in_the_code_is_a_setting_with_a_flag() -> None:
    used = set()
    for path in (ROOT / "pau_mcp").rglob("*.py"):
        used |= set(re.findall(r"\b(PAU_[A-Z0-9_]+)\b", path.read_text()))
    for path in (ROOT / "wasm_runtime").rglob("*.py"):
        used |= set(re.findall(r"\b(PAU_[A-Z0-9_]+)\b", path.read_text()))
    declared = {spec.env: spec.flag for spec in SETTINGS.values()}
    assert used - set(declared) == set()
    assert all(flag.startswith("--") for flag in declared.values())
    assert len(set(declared.values())) == len(declared)


def test_every_pau_variable_the_docs_and_packaged_files_name_is_one_the_settings_read() -> None:
    """A user copies a variable from the docs or a packaged file's note: it must be one the code reads (the
    tests' own PAU_TEST_* variables aside, which tests/ reads)."""
    declared = {spec.env for spec in SETTINGS.values()}
    named: dict[str, set[str]] = {}
    for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "pau_mcp").rglob("*.json")]:
        for name in re.findall(r"\b(PAU_[A-Z0-9_]+)\b", path.read_text(encoding="utf-8")):
            if not name.startswith("PAU_TEST_"):
                named.setdefault(name, set()).add(path.relative_to(ROOT).as_posix())
    assert {name: where for name, where in named.items() if name not in declared} == {}


def test_variables_fill_in_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PAU_MCP_TIMEOUT", "0.5")
    monkeypatch.setenv("PAU_MCP_MEMORY_MB", "128")
    settings = Settings.from_env()
    assert settings.timeout_s == 0.5
    assert sandbox_limits(settings).memory_bytes == 128 * 1024 * 1024


def test_a_bad_value_names_its_flag_and_variable() -> None:
    with pytest.raises(SettingsError) as info:
        Settings.from_options(timeout_s=-1)
    assert "--timeout" in str(info.value) and "PAU_MCP_TIMEOUT" in str(info.value)


def test_the_data_directory_moves_with_one_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PAU_MCP_DATA_DIR", str(tmp_path))
    assert Settings.from_env().data_dir == tmp_path


def test_settings_hold_values_only_and_import_nothing_above_them() -> None:
    import ast

    tree = ast.parse((ROOT / "pau_mcp" / "config.py").read_text())
    imported = {"." * node.level + (node.module or "") for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert not {m for m in imported if m.startswith(("wasm_runtime", "pau_mcp", "runstore", "manifests"))}
    assert not [m for m in imported if m.startswith(".")]
    for builder in ("run_store", "manifest_store", "sandbox", "sandbox_limits"):
        assert not hasattr(Settings, builder)


def test_the_scorer_names_settings_without_the_command_line_table() -> None:
    source = (ROOT / "pau_mcp" / "scoring" / "service.py").read_text()
    assert "SETTINGS" not in source
    assert Settings.named("judge_model") == "--judge-model or PAU_JUDGE_MODEL"


def test_the_run_store_is_a_file_path_or_a_postgresql_url_kept_as_written(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    url = "postgresql://pau@db.example:5433/runs?sslmode=require"
    assert Settings.from_options(db=url).db_path == url  # as a path, its "//" would fold into "/"
    monkeypatch.setenv("PAU_MCP_DB", "postgres://db.example/runs")
    assert Settings.from_env().db_path == "postgres://db.example/runs"
    assert Settings.from_options(db="~/runs.db").db_path == Path.home() / "runs.db"
    assert Settings.from_options(data_dir=tmp_path).db_path == tmp_path / "runs.db"


def test_a_run_store_url_of_another_database_is_refused_with_the_forms_it_takes() -> None:
    with pytest.raises(SettingsError) as info:
        Settings.from_options(db="mysql://root@localhost/runs")
    assert "--db / PAU_MCP_DB" in str(info.value) and "postgresql://" in str(info.value)
