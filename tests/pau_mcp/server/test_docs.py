"""`pau-mcp serve --docs`: tools documented by what an explorer learned, seen through the official MCP client in
both protocol eras; gold text reaches an agent only when the operator serves `--docs gold`."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from conftest import SECRETS, memory_client, tool_of
from mcp_types import Tool
from pau_command import run_pau
from serve_args import serve_parts

from pau_mcp.contract import FACTS_KEY
from pau_mcp.documentation import MAX_DOC_CHARS, load_documentation, near_gold, quotes_gold
from pau_mcp.manifests import ManifestStore
from pau_mcp.runstore import RunStore
from pau_mcp.server_assembly import AssemblyError, Served, assemble_server

LEARNED = "Upper-cases a string and appends an exclamation mark; multiplies a number by fifteen; 'boom' raises."


def _learned_run(db: Path, name: str = "learned", kind: str = "serve", texts: dict[str, str] | None = None) -> None:
    """A run whose sessions submitted descriptions, as a `pau-mcp serve` run records them (the latest counts)."""
    store = RunStore(db)
    run = store.ensure_run(name, kind, {"suites": ["secret"]})
    session = store.ensure_session(run, "s1", "http")
    store.record_submission(session, "secret/m1", "an early guess", None)
    for method_id, text in (texts if texts is not None else {"secret/m1": LEARNED}).items():
        store.record_submission(session, method_id, text, None)
    store.close()


def _assembled(args: list[str]) -> Served:
    """The server ``pau-mcp serve ARGS`` runs, built as the command builds it."""
    return assemble_server(*serve_parts(args))


async def _everything(*args: str, mode: str) -> tuple[str, dict[str, Tool]]:
    """Every text a client sees of a session on `serve ARGS` (tools, resources, prompts, calls, submit), and the
    listed tools by name."""
    seen: list[str] = []
    async with memory_client(*args, mode=mode) as client:
        with anyio.fail_after(60):
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            seen.append(json.dumps([tool.model_dump(mode="json", by_alias=True) for tool in tools.values()]))
            for resource in (await client.list_resources()).resources:
                seen.append((await client.read_resource(resource.uri)).model_dump_json())
            for prompt in (await client.list_prompts()).prompts:
                seen.append((await client.get_prompt(prompt.name)).model_dump_json())
            m1 = tool_of("secret/m1")
            for arguments in ({"arg0": "hey"}, {"arg0": "boom"}, {"args": "(2,)"}):
                seen.append((await client.call_tool(m1, arguments)).model_dump_json())
            seen.append((await client.call_tool("submit", {"method": m1, "description": "x"})).model_dump_json())
    return "\n".join(seen), tools


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_tools_served_with_learned_docs_show_each_methods_final_description_in_place_of_the_examples(
    tmp_path: Path, secret_manifests: Path, mode: str
) -> None:
    db = tmp_path / "runs.db"
    _learned_run(db)
    args = ("--manifests", str(secret_manifests), "--suite", "secret", "--db", str(db), "--docs", "learned")
    text, tools = anyio.run(lambda: _everything(*args, mode=mode))
    m1, m2 = tools[tool_of("secret/m1")], tools[tool_of("secret/m2")]
    assert LEARNED in (m1.description or "") and "an early guess" not in text
    assert "test_func('ab')" not in text and "Known examples" not in text  # the examples are replaced, everywhere
    assert m1.meta is not None
    assert m1.meta[FACTS_KEY]["examples"] == [] and m1.meta[FACTS_KEY]["header"] == "def test_func(arg0):"
    assert "no documentation" in (m2.description or "")  # the run never described m2
    assert "HEY!" in text  # the tools still run
    assert SECRETS["description"] not in text


def test_without_docs_the_tools_show_their_header_and_examples_as_always(
    tmp_path: Path, secret_manifests: Path
) -> None:
    args = ("--manifests", str(secret_manifests), "--suite", "secret", "--db", str(tmp_path / "runs.db"))
    text, tools = anyio.run(lambda: _everything(*args, mode="auto"))
    assert "Known examples" in (tools[tool_of("secret/m1")].description or "") and "test_func('ab')" in text


@pytest.mark.parametrize("docs", [None, "none", "examples", "learned", "exported"])
def test_no_response_of_a_whole_session_holds_gold_text_unless_the_operator_serves_gold(
    tmp_path: Path, secret_manifests: Path, docs: str | None
) -> None:
    db = tmp_path / "runs.db"
    _learned_run(db)
    exported = tmp_path / "docs.json"
    exporting = run_pau(
        "export", "docs", "learned", "--db", str(db), "--manifests", str(secret_manifests), "-o", str(exported)
    )
    assert exporting.returncode == 0, exporting.stderr
    args = ["--manifests", str(secret_manifests), "--suite", "secret", "--db", str(db)]
    if docs is not None:
        args += ["--docs", str(exported) if docs == "exported" else docs]
    text, _ = anyio.run(lambda: _everything(*args, mode="auto"))
    store = ManifestStore([secret_manifests])
    for method in store.methods(["secret"]):
        assert method.description not in text
    assert SECRETS["description"] not in text
    gold, _ = anyio.run(lambda: _everything(*args[:6], "--docs", "gold", mode="auto"))
    assert SECRETS["description"] in gold  # the same search finds gold text where the operator asked for it


def test_a_run_of_gold_descriptions_is_never_served_as_learned_docs(tmp_path: Path, secret_manifests: Path) -> None:
    db = tmp_path / "runs.db"
    gold = ManifestStore([secret_manifests]).method("secret/m1").description
    _learned_run(db, name="gold-secret", kind="gold", texts={"secret/m1": gold})
    with pytest.raises(AssemblyError, match="only with --docs gold"):
        _assembled(
            ["--manifests", str(secret_manifests), "--suite", "secret", "--db", str(db), "--docs", "gold-secret"]
        )


def _near_copies(gold: str) -> dict[str, str]:
    return {
        "quoted": f"My finding.\n  {gold.upper()}  and more.",
        "last-character-dropped": gold[:-1],
        "zero-width-space-added": gold.replace(" ", " \u200b", 1),
        "zero-width-spaces-everywhere": "\u200b".join(gold),
        "punctuation-and-case": gold.replace(",", " ;").replace(":", "").title(),
        "one-word-changed": gold.replace("scales", "multiplies"),
    }


@pytest.mark.parametrize("variant", list(_near_copies("x")), ids=str)
def test_learned_docs_holding_a_gold_description_or_nearly_are_left_out_and_the_rest_served(
    tmp_path: Path, secret_manifests: Path, variant: str
) -> None:
    # Before: the last character dropped or a zero-width space added served the gold text as learned docs; a text
    # that quoted it made the whole source unusable.
    db = tmp_path / "runs.db"
    store = ManifestStore([secret_manifests])
    gold = store.method("secret/m1").description
    _learned_run(db, texts={"secret/m1": _near_copies(gold)[variant], "secret/m2": "Loops on a true argument."})
    args = ["--manifests", str(secret_manifests), "--suite", "secret", "--db", str(db), "--docs", "learned"]
    built = _assembled(args)
    built.service.store.close()
    documentation = load_documentation("learned", db, store, ["secret"])
    assert documentation is not None and set(documentation.texts) == {"secret/m2"}
    assert "quotes its gold description" in documentation.skipped["secret/m1"]
    assert documentation.quoting == ("secret/m1",)


def test_a_learned_description_of_the_same_behaviour_in_other_words_is_served(
    tmp_path: Path, secret_manifests: Path
) -> None:
    store = ManifestStore([secret_manifests])
    for method_id, own_words in (
        ("secret/m1", LEARNED),
        ("secret/m2", "Never returns for a truthy input; returns 0 for a falsy one."),
    ):
        assert not near_gold(own_words, store.method(method_id).description)


def test_an_unknown_docs_source_says_what_the_sources_are(tmp_path: Path, secret_manifests: Path) -> None:
    result = run_pau(
        "serve", "--manifests", str(secret_manifests), "--suite", "secret", "--db", str(tmp_path / "r.db"),
        "--docs", "no-such-run",
    )  # fmt: skip
    assert result.returncode == 1 and "no run named 'no-such-run'" in result.stderr


def test_export_docs_writes_json_that_serve_reads_and_markdown_for_people(
    tmp_path: Path, secret_manifests: Path
) -> None:
    db = tmp_path / "runs.db"
    _learned_run(db)
    out = tmp_path / "docs.json"
    done = run_pau("export", "docs", "learned", "--db", str(db), "--manifests", str(secret_manifests), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "1 method documented from run learned; written to" in done.stderr
    document = json.loads(out.read_text())
    assert document["format"] == "pau-mcp/tool-docs" and document["run"] == "learned"
    assert document["methods"] == {"secret/m1": {"header": "def test_func(arg0):", "documentation": LEARNED}}
    assert document["skipped"] == {}  # a run without episodes knows only the methods it described
    markdown = run_pau(
        "export", "docs", "learned", "--db", str(db), "--manifests", str(secret_manifests), "--format", "markdown"
    ).stdout
    assert "## secret/m1" in markdown and LEARNED in markdown


def test_a_file_that_is_not_exported_documentation_is_refused_with_the_command_that_writes_one(
    tmp_path: Path, secret_manifests: Path
) -> None:
    bad = tmp_path / "docs.json"
    bad.write_text(json.dumps({"format": "something-else", "methods": {}}))
    with pytest.raises(AssemblyError, match="pau-mcp export docs"):
        _assembled(["--manifests", str(secret_manifests), "--suite", "secret", "--db", str(tmp_path / "r.db"),
                      "--docs", str(bad)])  # fmt: skip
    bad.write_text(
        json.dumps(
            {"format": "pau-mcp/tool-docs", "methods": {"secret/m1": {"documentation": "x" * (MAX_DOC_CHARS + 1)}}}
        )
    )
    with pytest.raises(AssemblyError, match="not a documentation file"):
        _assembled(["--manifests", str(secret_manifests), "--suite", "secret", "--db", str(tmp_path / "r.db"),
                      "--docs", str(bad)])  # fmt: skip


def test_the_gold_quote_check_reads_a_megabyte_of_its_worst_case_in_linear_time() -> None:
    gold = "a " * 5000 + "b"
    text = "a " * (
        512 * 1024
    )  # every position starts a near match: a naive search would compare 5,000 characters at each
    assert not quotes_gold(text, gold)
    assert quotes_gold(text + gold, gold)
    assert not quotes_gold(" \n\t" * (350 * 1024), gold)  # whitespace only: normalised to nothing


def test_the_near_gold_check_reads_a_megabyte_of_its_worst_cases_in_linear_time() -> None:
    long_gold = "counts the steps to reach one, dividing by three when it can; " * 3
    assert not near_gold("a " * (512 * 1024), long_gold)
    assert not near_gold("ab" * (512 * 1024), "counts steps to 1.")  # every character a step of the short search
    assert not near_gold("\u200b\u0301" * (512 * 1024), long_gold)  # every character dropped when folded
