"""`pau-mcp prompts import-reference`: the reference's wording read out of a checkout into the data directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fakereference import write_checkout
from pau_command import Ran, run_pau_process

import pau_mcp
from pau_mcp.prompts import PromptsError, PromptsMissing, import_reference, load_prompts

ROOT = Path(__file__).resolve().parents[3]


def pau(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAU_")} | {"COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "pau_mcp", *args], capture_output=True, text=True, timeout=120, cwd=ROOT, env=env
    )


def test_importing_a_checkout_writes_each_prompt_as_a_template_in_the_data_directory_only(tmp_path: Path) -> None:
    checkout = write_checkout(tmp_path / "checkout")
    data = tmp_path / "data"
    result = pau("prompts", "import-reference", str(checkout), "--data-dir", str(data))
    assert result.returncode == 0, result.stderr
    folder = data / "prompts" / "reference"
    assert sorted(p.name for p in folder.glob("*.txt")) == [
        "act.txt", "coder.txt", "incontext.txt", "judge.txt", "reason.txt", "reflect.txt",
    ]  # fmt: skip
    assert "reflect" in result.stdout and "last_inputs" in result.stdout
    # Nothing of the reference lands in the package.
    package = Path(pau_mcp.__file__).parent / "prompts"
    assert not any("JUDGE true=" in p.read_text() for p in package.rglob("*.txt"))


def test_an_imported_template_fills_the_references_placeholders_and_keeps_everything_else_as_text(
    tmp_path: Path,
) -> None:
    import_reference(write_checkout(tmp_path / "checkout"), tmp_path / "data")
    prompts = load_prompts("reference", tmp_path / "data")
    act = prompts.render("act", header="def test_func(arg0):", prev="[]", hypothesis="H", reasoning="R")
    assert act == (
        "\nACT header=def test_func(arg0):\nprev=[]\nhyp=H\nwhy=R\na literal {brace} and a [STOP] marker stay text\n"
        "Suggested Input:"
    )
    assert prompts.render("judge", true="gold", hypothesis="guess").endswith(
        "JUDGE true=gold\nhyp=guess\nExplanation (very short):"
    )
    assert prompts.templates["reason"].fields == {"header", "critique", "prev", "hypothesis"}


def test_a_directory_that_is_not_a_checkout_of_the_reference_is_refused_naming_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = pau("prompts", "import-reference", str(tmp_path / "empty"), "--data-dir", str(tmp_path / "data"))
    assert result.returncode == 1
    assert "has no utils/__init__.py" in result.stderr and "PAU-Benchmark" in result.stderr
    assert not (tmp_path / "data" / "prompts" / "reference").exists()


def test_a_prompt_whose_placeholders_differ_from_the_references_is_refused_and_the_old_set_kept(tmp_path: Path) -> None:
    data = tmp_path / "data"
    import_reference(write_checkout(tmp_path / "good"), data)
    broken = write_checkout(tmp_path / "broken", eval_py='eval_prompt = """JUDGE true=[TRUE] only"""\n')
    with pytest.raises(PromptsError, match=r"eval.py: eval_prompt has the placeholders \['TRUE'\]"):
        import_reference(broken, data)
    assert (
        load_prompts("reference", data)
        .render("judge", true="t", hypothesis="h")
        .endswith("hyp=h\nExplanation (very short):")
    )


def test_an_interpolation_the_reference_does_not_make_is_refused(tmp_path: Path) -> None:
    odd = write_checkout(tmp_path / "odd", eval_py='eval_prompt = f"""JUDGE [TRUE] [HYPOTHESIS] {secret()}"""\n')
    with pytest.raises(PromptsError, match=r"interpolates \{secret\(\)\}"):
        import_reference(odd, tmp_path / "data")


def test_the_reference_protocol_before_an_import_says_how_to_import_it(tmp_path: Path) -> None:
    with pytest.raises(PromptsMissing, match="pau-mcp prompts import-reference DIR"):
        load_prompts("reference", tmp_path)
    result = pau("eval", "--agent", "probe", "--protocol", "reference", "--data-dir", str(tmp_path), "--limit", "1")
    assert result.returncode == 1
    assert "pau-mcp prompts import-reference DIR" in result.stderr


def test_a_hand_edited_template_with_a_wrong_field_is_refused_with_its_file_and_how_to_repair_it(
    tmp_path: Path,
) -> None:
    import_reference(write_checkout(tmp_path / "checkout"), tmp_path / "data")
    path = tmp_path / "data" / "prompts" / "reference" / "judge.txt"
    path.write_text(path.read_text().replace("{hypothesis}", "{guess}"))
    with pytest.raises(
        PromptsError, match=r"judge.txt has fields \['guess', 'true'\], expected \['hypothesis', 'true'\]"
    ):
        load_prompts("reference", tmp_path / "data")


# -- a checkout that is not what it seems -------------------------------------------------------------------------


def _import(checkout: Path, data: Path) -> Ran:
    """The command with its memory capped at 2 GB and a minute to run: what once read /dev/zero or waited on a FIFO
    fails here, instead of the machine running out of memory or the test waiting forever."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAU_")} | {"COLUMNS": "200"}
    return run_pau_process(
        "prompts", "import-reference", checkout, "--data-dir", data, env=env, cwd=ROOT, timeout=60,
        memory_limit=2 << 30,
    )  # fmt: skip


def _refused_in_one_line(result: Ran, *expected: str) -> None:
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert all(text in lines[0] for text in expected), lines[0]


def _origin(data: Path) -> dict[str, Any]:
    origin: dict[str, Any] = json.loads((data / "prompts" / "reference" / "origin.json").read_text())
    return origin


def test_the_checkouts_commit_is_recorded_from_its_git_directory(tmp_path: Path) -> None:
    checkout = write_checkout(tmp_path / "checkout")
    (checkout / ".git" / "refs" / "heads").mkdir(parents=True)
    (checkout / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (checkout / ".git" / "refs" / "heads" / "main").write_text("ab" * 20 + "\n")
    assert _import(checkout, tmp_path / "data").returncode == 0
    assert _origin(tmp_path / "data")["commit"] == "ab" * 20


@pytest.mark.parametrize(
    "head",
    ["ref: ../../secret.txt", "ref: refs/../../../secret.txt", "ref: refs/heads/main", "link", "fifo", "zero"],
)
def test_a_git_head_that_names_anything_but_a_commit_inside_git_records_none_and_copies_nothing(
    tmp_path: Path, head: str
) -> None:
    (tmp_path / "secret.txt").write_text("TOP-SECRET-" + "cd" * 20)
    checkout = write_checkout(tmp_path / "checkout")
    git = checkout / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    if head == "link":
        (git / "HEAD").symlink_to(tmp_path / "secret.txt")
    elif head == "fifo":
        os.mkfifo(git / "HEAD")
    elif head == "zero":
        (git / "HEAD").symlink_to("/dev/zero")
    else:
        (git / "HEAD").write_text(head + "\n")
        (git / "refs" / "heads" / "main").symlink_to(tmp_path / "secret.txt")
    result = _import(checkout, tmp_path / "data")
    assert result.returncode == 0, result.stderr[-2000:]
    assert _origin(tmp_path / "data")["commit"] is None
    assert "TOP-SECRET" not in (tmp_path / "data" / "prompts" / "reference" / "origin.json").read_text()


def test_a_checkout_file_that_links_out_of_the_checkout_is_refused_in_one_line(tmp_path: Path) -> None:
    elsewhere = write_checkout(tmp_path / "elsewhere")
    checkout = write_checkout(tmp_path / "checkout")
    (checkout / "eval.py").unlink()
    (checkout / "eval.py").symlink_to(elsewhere / "eval.py")
    _refused_in_one_line(_import(checkout, tmp_path / "data"), "eval.py leads outside", "PAU-Benchmark")
    assert not (tmp_path / "data" / "prompts" / "reference").exists()


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "directory", "oversized"])
def test_a_checkout_file_that_is_not_a_regular_file_of_sensible_size_is_refused_in_one_line(
    tmp_path: Path, kind: str
) -> None:
    checkout = write_checkout(tmp_path / "checkout")
    path = checkout / "baselines.py"
    path.unlink()
    expected = {"fifo": "is a FIFO", "/dev/zero": "leads outside", "directory": "is a directory"}.get(kind, "at most")
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "/dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_text("# padding\n" * 500_000)
    _refused_in_one_line(_import(checkout, tmp_path / "data"), "baselines.py", expected)


def test_an_expression_of_100000_terms_is_refused_in_one_line(tmp_path: Path) -> None:
    terms = " + ".join(['"JUDGE [TRUE] [HYPOTHESIS]"'] * 100_000)
    checkout = write_checkout(tmp_path / "checkout", eval_py=f"eval_prompt = {terms}\n")
    _refused_in_one_line(_import(checkout, tmp_path / "data"), "eval.py", "nests deeper than Python's parser goes")
    # Within the parser's reach, the expression is named (clipped), or, too deep to print, its kind.
    for count, shown in ((100, "interpolates {x + x + x"), (600, "interpolates a FormattedValue expression")):
        text = 'eval_prompt = f"""JUDGE [TRUE] [HYPOTHESIS] {' + " + ".join(["x"] * count) + '}"""\n'
        result = _import(write_checkout(tmp_path / f"wide{count}", eval_py=text), tmp_path / "data")
        _refused_in_one_line(result, shown)
        assert len(result.stderr) < 400
