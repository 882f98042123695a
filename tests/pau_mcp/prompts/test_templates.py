"""This project's prompt templates: one place for every prompt, checked when loaded."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import pau_mcp
from pau_mcp.prompts import SPECS, PromptsError, load_prompts, parse_template
from pau_mcp.protocol import RULES, Protocol
from pau_mcp.scoring import judge_messages

PACKAGE = Path(pau_mcp.__file__).parent


def test_the_packaged_set_holds_every_template_with_exactly_its_fields() -> None:
    prompts = load_prompts()
    assert set(prompts.templates) == set(SPECS["pau-mcp"])
    for name, template in prompts.templates.items():
        assert template.fields == SPECS["pau-mcp"][name], name


def test_no_prompt_text_is_written_in_the_code_as_well() -> None:
    sources = "\n".join(p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py"))
    for name, template in load_prompts().templates.items():
        # The longest run of the template's own words (no fields, no line breaks) must appear only in its file.
        pieces = [p.strip() for p in re.split(r"\{\w+\}|\n", template.text) if len(p.strip()) >= 30]
        for piece in pieces:
            assert piece[:60] not in sources, f"{name}: {piece[:60]!r} is also in the code"


def test_what_the_judge_sends_is_read_from_the_template_set_it_is_given() -> None:
    packaged = load_prompts()
    edited = {name: t for name, t in packaged.templates.items()}
    edited["judge"] = parse_template("judge", "Compare {reference} with {candidate} ({tag}).")
    protocol = Protocol(RULES["pau-mcp"], type(packaged)("pau-mcp", edited, "test"))
    messages = judge_messages("gold text", "guess text", protocol)
    assert messages[1]["content"].startswith("Compare <reference-")
    assert "gold text" in messages[1]["content"] and "guess text" in messages[1]["content"]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a {", "Single '{'"),
        ("{0} first", "is not a plain name"),
        ("{value!r}", "is not a plain name"),
        ("{a.b}", "is not a plain name"),
    ],
)
def test_a_template_with_a_lone_brace_or_a_field_that_is_not_a_plain_name_is_refused(text: str, problem: str) -> None:
    with pytest.raises(PromptsError, match=re.escape(problem)):
        parse_template("t", text)
