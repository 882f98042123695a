"""Hidden-method suites: the manifest model, suites on disk, and importers."""

from .model import Case, FrozenOutcome, Method, Provenance, SuiteInfo, Tags, call_text, tool_name
from .store import PACKAGED_MANIFESTS, ManifestError, ManifestStore, Suite, dump_method

__all__ = [
    "PACKAGED_MANIFESTS",
    "Case",
    "FrozenOutcome",
    "ManifestError",
    "ManifestStore",
    "Method",
    "Provenance",
    "Suite",
    "SuiteInfo",
    "Tags",
    "call_text",
    "dump_method",
    "tool_name",
]
