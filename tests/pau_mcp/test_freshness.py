"""A model's score on a suite is fresh only when the suite was made after the model's release or training cutoff;
everything the rule cannot date is never fresh."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from pau_mcp.freshness import assess_freshness, freshness_line, suite_day
from pau_mcp.llm import CapabilityTable, LLMNotConfigured, ModelDates
from pau_mcp.llm.models import DEFAULT_CAPABILITIES
from pau_mcp.manifests import ManifestStore, SuiteInfo

CREATED = datetime(2026, 3, 1, 12, tzinfo=UTC)
RELEASED = ModelDates(released=date(2025, 8, 7), cutoff=date(2024, 9, 30))


def test_a_suite_created_after_the_models_release_is_fresh_and_one_created_before_is_not() -> None:
    mine = SuiteInfo(name="mine", created=CREATED)
    assert assess_freshness(mine, "openai/m", RELEASED).status == "fresh"
    late = ModelDates(released=date(2026, 3, 1))  # the same day is not after
    verdict = assess_freshness(mine, "openai/m", late)
    assert verdict.status == "stale" and not verdict.fresh
    assert freshness_line("openai/m", "mine", verdict) == (
        "openai/m on suite mine: not fresh (suite mine was created on 2026-03-01, but openai/m was released 2026-03-01)"
    )


def test_the_later_of_release_and_cutoff_counts_and_a_cutoff_alone_is_enough() -> None:
    mine = SuiteInfo(name="mine", created=CREATED)
    trained_late = ModelDates(released=date(2025, 1, 1), cutoff=date(2026, 6, 1))
    assert assess_freshness(mine, "openai/m", trained_late).status == "stale"
    only_cutoff = assess_freshness(mine, "openai/m", ModelDates(cutoff=date(2025, 1, 1)))
    assert only_cutoff.status == "fresh" and "trained up to 2025-01-01" in only_cutoff.reason


def test_dated_functions_count_from_their_first_publication_not_from_the_suites_creation() -> None:
    rotated = SuiteInfo(name="r", created=CREATED, after=date(2025, 1, 1), first_published=date(2025, 5, 2))
    assert suite_day(rotated)[0] == date(2025, 5, 2)
    assert assess_freshness(rotated, "openai/m", RELEASED).status == "stale"  # published before the model's release
    assert assess_freshness(rotated, "openai/m", ModelDates(released=date(2025, 5, 1))).status == "fresh"


def test_public_functions_an_undated_suite_and_an_unknown_model_are_never_fresh() -> None:
    public = SuiteInfo(name="p", created=CREATED, public_source=True)
    assert assess_freshness(public, "openai/m", RELEASED).status == "unknown"
    builtin = ManifestStore().suite("builtin").info
    verdict = assess_freshness(builtin, "openai/m", RELEASED)
    assert verdict.status == "unknown" and "records no creation date" in verdict.reason
    unknown = assess_freshness(SuiteInfo(name="mine", created=CREATED), "openai/new", ModelDates())
    assert unknown.status == "unknown" and "--model-capabilities" in unknown.reason


def test_the_packaged_table_dates_known_models_and_a_table_of_ones_own_overrides_it(tmp_path: Path) -> None:
    packaged = CapabilityTable.load()
    assert packaged.dates("openai/gpt-4o-mini") == ModelDates(date(2024, 7, 18), date(2023, 10, 1))
    assert packaged.dates("openai/gpt-4o-mini-2024-07-18") == packaged.dates("openai/gpt-4o-mini")
    assert packaged.dates("openai/gpt-5.2") == ModelDates()  # a later model is not dated by an earlier one's row
    own = tmp_path / "mine.json"
    own.write_text(json.dumps({"models": [{"match": ["gpt-4o-mini"], "released": "2026-06-01"}]}))
    overridden = CapabilityTable.load(own).dates("openai/gpt-4o-mini")
    assert overridden == ModelDates(date(2026, 6, 1), date(2023, 10, 1))  # the cutoff still comes from the package
    own.write_text(json.dumps({"models": [{"match": ["x"], "released": "June 2026"}]}))
    with pytest.raises(LLMNotConfigured, match="released"):
        CapabilityTable.load(own)


def test_every_dated_row_of_the_packaged_table_names_exact_models_and_is_released_after_its_cutoff() -> None:
    rows = json.loads(DEFAULT_CAPABILITIES.read_text())["models"]
    dated = [row for row in rows if "released" in row or "cutoff" in row]
    assert len(dated) >= 20
    for row in dated:
        assert not any("*" in m or "?" in m for m in row["match"]), row  # a pattern would date later models too
        if "cutoff" in row:
            assert row["cutoff"] <= row["released"], row
