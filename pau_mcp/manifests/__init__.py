"""Hidden-method suites: the manifest model, suites on disk, and importers."""

from .model import (
    Case,
    FrozenOutcome,
    GoldCheck,
    Method,
    Original,
    Provenance,
    SuiteInfo,
    Tags,
    call_arguments,
    call_text,
    tool_name,
)
from .store import ManifestError, ManifestStore, Suite, dump_method, packaged_manifests

__all__ = [
    "Case",
    "FrozenOutcome",
    "GoldCheck",
    "ManifestError",
    "ManifestStore",
    "Method",
    "Original",
    "Provenance",
    "Suite",
    "SuiteInfo",
    "Tags",
    "call_arguments",
    "call_text",
    "dump_method",
    "packaged_manifests",
    "tool_name",
]
