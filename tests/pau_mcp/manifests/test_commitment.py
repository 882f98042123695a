"""Commitments to a private suite: `pau-mcp manifests commit` publishes digests that reveal nothing, and
`pau-mcp manifests verify` proves a revealed suite is the committed one or names every part that differs."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pau_command import Ran, run_pau

from pau_mcp.manifests import Case, ManifestStore, Method, Provenance, Suite, SuiteInfo, Tags, Task, TaskStep
from pau_mcp.manifests.checks import freeze_method, freeze_task
from pau_mcp.manifests.commitment import SALT_FILE, commit_suite, read_commitment, verify_suite
from wasm_runtime import Sandbox

SOURCES = {
    "m1": "QX_TABLE = {'kiwi-zebra': 7}\n\ndef test_func(arg0):\n    return QX_TABLE.get(arg0, 'no-such-fruit')\n",
    "m2": "def test_func(arg0, arg1):\n    return f'{arg0}-joined-{arg1}'\n",
    "m3": "def test_func(arg0):\n    if arg0 == 'blow':\n        raise KeyError('hidden error text')\n    return len(arg0)\n",
}
INPUTS = {
    "m1": ["('kiwi-zebra',)", "('mango-quail',)", "('',)"],
    "m2": ["('left', 'right')", "('alpha', 'omega')", "('x', 'y')"],
    "m3": ["('blow',)", "('walrus',)", "('a',)"],
}

# What the fixture ``committed`` gives: the manifests folder, the commitment's file, and the commit command's run.
Committed = tuple[Path, Path, Ran]


def make_suite(root: Path, sandbox: Sandbox) -> Suite:
    suite = Suite.create(root, SuiteInfo(name="secret", description="a private split", dataset="mine"))
    for name, source in SOURCES.items():
        params = ["arg0", "arg1"] if name == "m2" else ["arg0"]
        method = Method(
            id=f"secret/{name}", header=f"def test_func({', '.join(params)}):", params=params, source=source,
            description=f"GOLD-{name.upper()}: what the hidden function {name} does, in words.",
            examples=[Case(input=i) for i in INPUTS[name][:1]], tests=[Case(input=i) for i in INPUTS[name][1:]],
            provenance=Provenance(dataset="mine", original_name=f"fruit_lookup_{name}"), tags=Tags(arity=len(params)),
        )  # fmt: skip
        suite.save(freeze_method(method, sandbox))
    task = Task(
        id="secret/t1", question="What does the lookup give for 'kiwi-zebra'?",
        steps=[TaskStep(method="secret/m1", input="('kiwi-zebra',)")],
    )  # fmt: skip
    suite.save_task(freeze_task(task, suite.methods, sandbox)[0])
    return suite


def hidden_strings(suite: Suite) -> set[str]:
    """Every text of the suite that is not public, at least 4 characters long and not made of hex digits only (a
    string of hex digits could occur in a digest by chance)."""
    found: set[str] = set()

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str):
            for part in {value, *value.splitlines(), *value.split()}:
                part = part.strip()
                if len(part) >= 4 and not all(c in "0123456789abcdef" for c in part):
                    found.add(part)

    for method in suite.methods.values():
        walk(method.model_dump(mode="json", exclude={"id", "header", "params", "entry"}))
    for task in suite.tasks.values():
        walk(task.model_dump(mode="json", exclude={"id"}))
    walk(suite.info.model_dump(mode="json", exclude={"name", "created"}))
    return found - set(suite.methods) - set(suite.tasks)  # ids are what a commitment names


@pytest.fixture
def committed(tmp_path: Path, sandbox: Sandbox) -> Committed:
    root = tmp_path / "suites"
    make_suite(root, sandbox)
    out = tmp_path / "public" / "secret.commitment.json"
    out.parent.mkdir()
    ran = run_pau("manifests", "commit", "secret", "--manifests", root, "--out", out)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return root, out, ran


def verify(root: Path, out: Path, *extra: str | Path) -> Ran:
    return run_pau("manifests", "verify", "secret", out, "--manifests", root, *extra)


def test_a_revealed_suite_verifies_against_its_commitment(committed: Committed) -> None:
    root, out, ran = committed
    assert "committed to suite secret (3 methods, 1 tasks)" in ran.stdout
    salt = root / "secret" / SALT_FILE
    assert salt.is_file() and oct(salt.stat().st_mode & 0o777) == "0o600"
    checked = verify(root, out)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert (
        "is the one committed to on" in checked.stdout and "3 methods, 1 tasks and suite.json match" in checked.stdout
    )


def test_one_changed_byte_of_one_method_is_named(committed: Committed) -> None:
    root, out, _ = committed
    path = root / "secret" / "m2.json"
    text = path.read_text()
    path.write_text(text.replace("('alpha', 'omega')", "('alpha', 'omegb')", 1))  # one byte of a hidden test
    checked = verify(root, out)
    assert checked.returncode == 1
    assert "is NOT the one committed to" in checked.stdout
    assert [line.strip() for line in checked.stdout.splitlines()[1:]] == ["differs: secret/m2"]


def test_a_changed_gold_a_removed_method_an_added_one_and_suite_json_are_each_named(
    committed: Committed, sandbox: Sandbox
) -> None:
    root, out, _ = committed
    m1 = root / "secret" / "m1.json"
    m1.write_text(json.dumps(json.loads(m1.read_text()), indent=7))  # another layout, the same values: no difference
    m3 = root / "secret" / "m3.json"
    data = json.loads(m3.read_text())
    data["description"] = data["description"] + "!"
    m3.write_text(json.dumps(data))
    (root / "secret" / "m2.json").rename(root / "secret" / "m4.json")
    moved = json.loads((root / "secret" / "m4.json").read_text())
    moved["id"] = "secret/m4"
    (root / "secret" / "m4.json").write_text(json.dumps(moved))
    info = json.loads((root / "secret" / "suite.json").read_text())
    info["description"] = "edited"
    (root / "secret" / "suite.json").write_text(json.dumps(info))
    lines = [line.strip() for line in verify(root, out).stdout.splitlines()[1:]]
    assert lines == [
        "suite.json differs", "differs: secret/m3", "missing (committed, not in the suite): secret/m2",
        "added (in the suite, not committed): secret/m4",
    ]  # fmt: skip


def test_the_commitment_reveals_no_hidden_text(committed: Committed, sandbox: Sandbox) -> None:
    root, out, _ = committed
    text = out.read_text()
    suite = ManifestStore([root], include_packaged=False).suite("secret")
    secrets = hidden_strings(suite)
    assert {"('kiwi-zebra',)", "'hidden error text'", "fruit_lookup_m1", "GOLD-M1:", "QX_TABLE"} <= secrets
    leaked = sorted(s for s in secrets if s in text)
    assert not leaked, leaked
    assert (root / "secret" / SALT_FILE).read_text().strip() not in text
    fields = json.loads(text)
    assert set(fields) == {
        "format", "suite", "committed", "created", "algorithm", "suite_digest", "info_digest", "methods", "tasks",
    }  # fmt: skip
    assert sorted(fields["methods"]) == ["secret/m1", "secret/m2", "secret/m3"]


def test_two_equal_methods_have_different_digests_and_another_salt_matches_nothing(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    suite = make_suite(tmp_path, sandbox)
    twin = suite.methods["secret/m3"].model_copy(update={"id": "secret/m5"})
    suite.save(twin)
    commitment = commit_suite(suite, b"s" * 32, read_commitment_date())
    assert commitment.methods["secret/m3"] != commitment.methods["secret/m5"]
    other = verify_suite(suite, commitment, b"t" * 32)
    assert other.info_differs and len(other.differ) == other.checked == 5


def read_commitment_date() -> datetime:
    return datetime(2026, 12, 7, tzinfo=UTC)


def test_a_wrong_salt_says_so_and_a_missing_one_says_where_to_find_it(committed: Committed, tmp_path: Path) -> None:
    root, out, _ = committed
    wrong = tmp_path / "wrong.salt"
    wrong.write_text(os.urandom(32).hex())
    checked = verify(root, out, "--salt", wrong)
    assert checked.returncode == 1 and "is this the salt the commitment was made with?" in checked.stdout
    (root / "secret" / SALT_FILE).unlink()
    missing = verify(root, out)
    assert missing.returncode == 1 and "give its file with --salt" in missing.stderr


def test_a_file_that_is_not_a_commitment_is_refused_in_one_line(committed: Committed, tmp_path: Path) -> None:
    root, _, _ = committed
    for name, text in (
        ("garbage.json", "not json at all"),
        ("deep.json", "[" * 100_000),
        ("wrong.json", json.dumps({"format": "something else"})),
    ):
        path = tmp_path / name
        path.write_text(text)
        checked = verify(root, path)
        assert checked.returncode == 1 and "not a suite commitment" in checked.stderr, checked.stderr
        assert "Traceback" not in checked.stderr
    with pytest.raises(Exception, match="not a suite commitment"):
        read_commitment(tmp_path / "wrong.json")


def test_an_existing_commitment_is_kept_unless_replaced_and_the_salt_is_kept_too(committed: Committed) -> None:
    root, out, _ = committed
    salt = (root / "secret" / SALT_FILE).read_text()
    again = run_pau("manifests", "commit", "secret", "--manifests", root, "--out", out)
    assert again.returncode == 2 and "--replace" in again.stderr
    replaced = run_pau("manifests", "commit", "secret", "--manifests", root, "--out", out, "--replace")
    assert replaced.returncode == 0 and "(kept)" in replaced.stdout
    assert (root / "secret" / SALT_FILE).read_text() == salt
    assert verify(root, out).returncode == 0
