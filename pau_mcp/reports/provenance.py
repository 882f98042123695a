"""What a published result must say about where it came from: pau-mcp's version, the suite's identity and date, the
prompts and protocol, and the model's training cutoff where known (the exports and the leaderboard share these).

A suite's **digest** is the SHA-256 of its methods as stored (each method's JSON, in id order): two runs with the
same digest ran the same hidden functions, tests and examples, whatever the suite is called. It says nothing of
their content.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pau_mcp import __version__
from pau_mcp.llm import CapabilityTable
from pau_mcp.manifests import ManifestError, ManifestStore

if TYPE_CHECKING:
    from pau_mcp.freshness import Freshness

    from .data import RunData

__all__ = [
    "SuiteIdentity", "freshness_verdicts", "model_cutoff", "model_cutoffs", "suite_dates", "suite_identity",
    "variant_origins",
]  # fmt: skip


@dataclass(frozen=True)
class SuiteIdentity:
    """One suite as a result names it.

    Attributes:
        name: The suite.
        methods: Its methods.
        digest: ``sha256:<hex>`` of its methods as stored; "" when the suite is not installed here.
        created: Its creation date as its manifest records it (ISO 8601), when it does.
        dataset: Where its methods come from (its manifest's ``dataset``).
        license: Its license, when recorded.
        url: Its home, when recorded.
    """

    name: str
    methods: int = 0
    digest: str = ""
    created: str | None = None
    dataset: str = ""
    license: str | None = None
    url: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The identity as results files carry it, with the pau-mcp version that read it."""
        return {
            "name": self.name, "methods": self.methods, "digest": self.digest, "created": self.created,
            "dataset": self.dataset, "license": self.license, "url": self.url, "pau_mcp_version": __version__,
        }  # fmt: skip


def suite_identity(manifests: ManifestStore, name: str) -> SuiteIdentity:
    """The identity of the installed suite ``name``; a suite not installed here is known by its name alone."""
    try:
        suite = manifests.suite(name)
    except ManifestError:
        return SuiteIdentity(name)
    digest = hashlib.sha256()
    for method_id in sorted(suite.methods):
        digest.update(method_id.encode())
        digest.update(b"\0")
        digest.update(suite.methods[method_id].model_dump_json().encode())
        digest.update(b"\0")
    info = suite.info
    created = getattr(info, "created", None)
    return SuiteIdentity(
        name=name, methods=len(suite.methods), digest=f"sha256:{digest.hexdigest()}",
        created=None if created is None else str(created), dataset=info.dataset, license=info.license, url=info.url,
    )  # fmt: skip


def model_cutoff(capabilities: CapabilityTable, model: str) -> str | None:
    """The model's training-data cutoff as the capability table records it, or None where it records none."""
    if not model:
        return None
    found = capabilities.dates(model).cutoff
    return None if found is None else str(found)


def suites_of(names: Iterable[str]) -> list[str]:
    """The suite names of a run's ``suite`` setting (one, or several comma-separated)."""
    return [name.strip() for value in names for name in value.split(",") if name.strip()]


def variant_origins(manifests: ManifestStore, runs: Sequence[RunData]) -> dict[str, str]:
    """Each variant among the runs' methods -> the method it was made from, read from the installed suites."""
    known = set(manifests.names())
    origins: dict[str, str] = {}
    for name in sorted({m.method_id.split("/", 1)[0] for run in runs for m in run.methods} & known):
        try:
            suite = manifests.suite(name)
        except ManifestError:
            continue  # a broken suite is reported where it is described; the table just leaves it out
        origins.update({m.id: m.provenance.variant_of for m in suite.methods.values() if m.provenance.variant_of})
    return origins


def suite_dates(manifests: ManifestStore, runs: Sequence[RunData]) -> dict[str, str | None]:
    """Each run's suite -> its creation date, where its manifest records one."""
    return {run.suite: suite_identity(manifests, run.suite).created for run in runs}


def model_cutoffs(capabilities: CapabilityTable, runs: Sequence[RunData]) -> dict[str, str | None]:
    """Each run's model -> its training-data cutoff, where the capability table records one."""
    return {run.setting("model"): model_cutoff(capabilities, run.setting("model")) for run in runs}


def freshness_verdicts(
    manifests: ManifestStore, capabilities: CapabilityTable, runs: Sequence[RunData]
) -> dict[tuple[str, str], Freshness]:
    """Each (model, suite)'s freshness: the suite made after the model's release or cutoff (``pau_mcp.freshness``)."""
    from pau_mcp.freshness import assess_freshness

    verdicts: dict[tuple[str, str], Freshness] = {}
    for run in runs:
        model = run.setting("model")
        try:
            info = manifests.suite(run.suite).info
        except ManifestError:
            continue
        if model:
            verdicts[(model, run.suite)] = assess_freshness(info, model, capabilities.dates(model))
    return verdicts
