"""`pau-mcp create DIR` and `pau-mcp import python DIR` read only what the folder holds: a `.py` link leading out of
it is refused unread (its text never reaches the model), a linked binary is refused with a reason instead of a
traceback, and a file name's terminal escapes are shown as escapes."""

from __future__ import annotations

import os
from pathlib import Path

from creating import create_env
from fakellm import FakeLLM
from pau_command import run_pau
from scripted import Known, ScriptedModel

SECRET = "TOPSECRET-1801"
ESCAPE = "\x1b]0;pwned\x07\x1b[31m"


def make_folder(tmp_path: Path) -> Path:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.py").write_text(f"def secret(x):\n    return '{SECRET}' + str(x)\n")
    (outside / "tool.bin").write_bytes(bytes(range(256)) * 64)
    folder = tmp_path / "funcs"
    folder.mkdir()
    (folder / "good.py").write_text("def good(x):\n    return x * 2 + 0 * 1802\n")
    (folder / "leak.py").symlink_to(outside / "secret.py")
    (folder / "far.py").symlink_to(outside / "tool.bin")
    (folder / "bin").mkdir()
    (folder / "bin" / "tool.bin").write_bytes(bytes(range(256)) * 64)
    (folder / "tool.py").symlink_to(folder / "bin" / "tool.bin")  # inside, but a binary
    (folder / "blob.py").write_bytes(b"\xff\xfe\x00binary")
    (folder / f"{ESCAPE}evil.py").write_text("def evil(x):\n    return x\n")
    (folder / "good.descriptions.json").symlink_to(outside / "secret.py")  # a sidecar leading out too
    return folder


def test_create_reads_nothing_outside_the_folder_and_refuses_what_it_cannot_read(tmp_path: Path) -> None:
    folder = make_folder(tmp_path)
    (folder / "good.descriptions.json").unlink()
    known = Known("1802", ["(1,)", "(2,)", "(3,)", "(0,)", "(5,)", "(9,)"], "Doubles arg0.", "Doubles", "")
    with FakeLLM(ScriptedModel([known])) as fake:
        ran = run_pau(
            "create", folder, "--model", "openai/gpt-4o-mini", "--manifests", tmp_path / "suites", "--no-validator",
            env=create_env(fake, tmp_path / "data"),
        )  # fmt: skip
        asked = "\n".join(str(body) for body in fake.requests)
    assert "Traceback" not in ran.stderr, ran.stderr
    assert SECRET not in asked and SECRET not in ran.stdout
    assert "leak.py: [unreadable]" in ran.stdout and "leads outside" in ran.stdout
    assert "far.py: [unreadable]" in ran.stdout and "tool.py: [unreadable]" in ran.stdout
    assert "blob.py: [unreadable]" in ran.stdout and "is not utf-8 text" in ran.stdout
    assert "\x1b" not in ran.stdout and "\x07" not in ran.stdout and "\\x1b]0;pwned\\x07" in ran.stdout


def test_a_sidecar_leading_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    folder = make_folder(tmp_path)
    with FakeLLM(ScriptedModel([])) as fake:
        ran = run_pau(
            "create", folder, "--model", "openai/gpt-4o-mini", "--manifests", tmp_path / "suites",
            env=create_env(fake, tmp_path / "data"),
        )  # fmt: skip
    assert ran.returncode == 1 and "Traceback" not in ran.stderr
    assert "good.descriptions.json leads outside" in ran.stderr and SECRET not in ran.stderr


def test_import_python_reads_nothing_outside_the_folder(tmp_path: Path) -> None:
    folder = make_folder(tmp_path)
    (folder / "good.descriptions.json").unlink()
    (folder / "good.inputs.json").write_text('{"good": ["(1,)", "(2,)"]}')
    (folder / "good.descriptions.json").write_text('{"good": "Doubles its argument."}')
    ran = run_pau("import", "python", folder, "--manifests", tmp_path / "suites")
    assert "Traceback" not in ran.stderr, ran.stderr
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "leak.py: unreadable:" in ran.stdout and "leads outside" in ran.stdout
    assert "far.py: unreadable:" in ran.stdout and "tool.py: unreadable:" in ran.stdout
    assert "blob.py: unreadable:" in ran.stdout
    assert "\x1b" not in ran.stdout and "\\x1b]0;pwned\\x07" in ran.stdout
    suite = tmp_path / "suites" / "funcs"
    assert SECRET not in "".join(p.read_text() for p in suite.glob("*.json"))
    assert not any(os.path.islink(p) for p in suite.iterdir())
