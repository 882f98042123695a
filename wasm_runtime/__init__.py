"""A WebAssembly sandbox for hidden Python functions.

Knows nothing of MCP, manifests or scoring: it takes source, an entry name
and argument literals, and returns outcomes.
"""

from .build import BuildError, CacheError, GuestArtifacts, default_cache_dir, ensure_built
from .engines import ENGINES, EngineUnavailable, engine_for, numpy_engine_installed
from .interface import SandboxClosed, SandboxInterface
from .limits import FUEL_PER_SECOND, WALL_CLOCK_FACTOR, Limits
from .literals import InvalidInput, literal_value, parse_arguments, parse_python
from .outcome import Comparison, Outcome, Status, compare_outcomes, outcomes_match
from .sandbox import VIRTUAL_EPOCH_S, Sandbox
from .values import EncodingError, Opaque, decode, encode, values_equal

__all__ = [
    "ENGINES",
    "EngineUnavailable",
    "engine_for",
    "numpy_engine_installed",
    "FUEL_PER_SECOND",
    "VIRTUAL_EPOCH_S",
    "WALL_CLOCK_FACTOR",
    "BuildError",
    "CacheError",
    "Comparison",
    "EncodingError",
    "GuestArtifacts",
    "InvalidInput",
    "Limits",
    "Opaque",
    "Outcome",
    "Sandbox",
    "SandboxClosed",
    "SandboxInterface",
    "Status",
    "compare_outcomes",
    "decode",
    "default_cache_dir",
    "encode",
    "ensure_built",
    "literal_value",
    "outcomes_match",
    "parse_arguments",
    "parse_python",
    "values_equal",
]
