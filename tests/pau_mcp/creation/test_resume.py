"""A `pau-mcp create` process killed with SIGKILL goes on where it stopped; the same seed and replies make the
same suite."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from creating import MODEL, Serve, create_env, report_of, run_create
from fakellm import FakeLLM
from scripted import Known, ScriptedModel

from pau_mcp.manifests import ManifestStore, dump_method

ROOT = Path(__file__).resolve().parents[3]
FIRST = Known(
    "2001",
    ["(1,)", "(2,)", "(3,)", "(0,)", "(8,)", "(-2,)"],
    "Adds 2001 to arg0.",
    "Adds 2001",
    "def test_func(arg0):\n    return arg0 + 2001",
)
SECOND = Known(
    "2002",
    ["(1,)", "(2,)", "(3,)", "(0,)", "(8,)", "(-2,)"],
    "Subtracts 2002 from arg0.",
    "Subtracts 2002",
    "def test_func(arg0):\n    return arg0 - 2002",
)


def corpus(folder: Path) -> Path:
    folder.mkdir()
    (folder / "a.py").write_text("def plus(x):\n    return x + 2001\n")
    (folder / "b.py").write_text("def minus(x):\n    return x - 2002\n")
    return folder


def test_a_killed_run_goes_on_where_it_stopped(tmp_path: Path) -> None:
    funcs = corpus(tmp_path / "funcs")
    model = ScriptedModel([FIRST, SECOND], hold="2002")
    state = tmp_path / "data" / "creation" / "funcs.jsonl"
    with FakeLLM(model) as fake:
        env = create_env(fake, tmp_path / "data")
        command = [
            sys.executable, "-m", "pau_mcp", "create", str(funcs), "--model", MODEL, "--manifests", str(tmp_path / "suites"),
            "--llm-concurrency", "1",
        ]  # fmt: skip
        process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert process.stderr is not None  # a pipe, as asked
        try:
            # One function at a time: when the second one's first request arrives, the first is on disk.
            assert model.reached.wait(120), (
                process.stderr.read().decode() if process.poll() is not None else "no request"
            )
            os.kill(process.pid, signal.SIGKILL)
            assert process.wait(30) == -signal.SIGKILL
        finally:
            model.release.set()
            if process.poll() is None:
                process.kill()
            process.communicate()
        lines = state.read_text().splitlines()
        assert len(lines) == 2 and '"a.py::plus"' in lines[1]  # the options, then the first function
        assert not (tmp_path / "suites" / "funcs").exists()  # the suite is written at the end only
        asked_before = dict(model.asked)
        model.hold = None
        # --no-cache: what the second run skips, it skips because of the state file, not the response cache.
        ran = run_create(fake, tmp_path / "data", tmp_path / "suites", funcs, "--llm-concurrency", "1", "--no-cache")
    report = report_of(ran)
    assert ran.returncode == 0 and report["resumed"] == 1
    assert sorted(r["outcome"] for r in report["records"]) == ["kept", "kept"]
    for step in ("validator", "inputs", "describe", "coder"):
        assert model.asked[step, "2001"] == asked_before.get((step, "2001"), 0), step  # not asked again
    assert model.asked["validator", "2002"] == 2  # asked before the kill, and again
    suite = ManifestStore([tmp_path / "suites"], include_packaged=False).suite("funcs")
    assert len(suite.methods) == 2


def test_a_run_with_other_options_does_not_take_over_the_state(tmp_path: Path, serve: Serve) -> None:
    funcs = corpus(tmp_path / "funcs")
    fake = serve(ScriptedModel([FIRST, SECOND]))
    assert run_create(fake, tmp_path / "data", tmp_path / "suites", funcs).returncode == 0
    from pau_command import run_pau

    env = create_env(fake, tmp_path / "data")
    other = run_pau(
        "create", funcs, "--model", MODEL, "--manifests", tmp_path / "suites", "--seed", "7", "--replace", env=env
    )
    assert other.returncode == 2
    assert "other options (seed was 0)" in other.stderr and "--restart" in other.stderr


def test_the_same_seed_and_replies_make_the_same_suite(tmp_path: Path, serve: Serve) -> None:
    funcs = corpus(tmp_path / "funcs")
    fake = serve(ScriptedModel([FIRST, SECOND]))
    made = {}
    for name, seed in (("one", "5"), ("two", "5"), ("three", "6")):
        ran = run_create(fake, tmp_path / "data", tmp_path / "suites", funcs, "--suite", name, "--seed", seed)
        assert ran.returncode == 0, ran.stdout
        spend = report_of(ran)["spend"]
        if name != "one":  # the same functions ask the same things: the response cache answers, for free
            assert spend["cached"] == spend["calls"] > 0 and spend["cost_usd"] == 0
        suite = ManifestStore([tmp_path / "suites"], include_packaged=False).suite(name)
        made[name] = [dump_method(m).replace(f'"{name}/', '"S/') for m in suite.methods.values()]
    assert made["one"] == made["two"]
    assert made["one"] != made["three"]  # another seed shows other examples


def test_a_key_the_provider_refuses_stops_the_run_and_keeps_what_was_decided(tmp_path: Path, serve: Serve) -> None:
    funcs = corpus(tmp_path / "funcs")
    fake = serve(ScriptedModel([FIRST, SECOND]))
    fake.require_key = "another-key"
    from pau_command import run_pau

    ran = run_pau(
        "create", funcs, "--model", MODEL, "--manifests", tmp_path / "suites", env=create_env(fake, tmp_path / "data")
    )
    assert ran.returncode == 1
    assert "401" in ran.stderr and "check OPENAI_API_KEY" in ran.stderr
    assert "run the same command again to go on" in ran.stderr
    assert (tmp_path / "data" / "creation" / "funcs.jsonl").is_file()
