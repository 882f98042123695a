"""``pau-mcp create``: new suites made the way the paper made PAU, and variants that defeat memorised answers.

It writes suites and never serves them: it sits beside the importers (whose anonymiser, manifest model, store,
freezing and validation it uses), asks models through ``pau_mcp.llm``, runs code only in the sandbox, and checks
gold descriptions with the scorer's own code match. See docs/creation.md.
"""

from .mutations import KINDS, Candidate, candidates
from .outcomes import REASONS, STEPS, CreationReport, Record, StepCost, StepOutcome
from .pipeline import GOLD_MODES, CreateOptions, create_suite, create_variants, side_effects
from .requests import Made, SuiteRequest, TasksRequest, make_suite, make_tasks
from .selection import Ran, Selection, select_cases
from .sources import DATASETS, Dataset, Item, Source, load_source
from .state import StateError, StateFile

__all__ = [
    "DATASETS",
    "GOLD_MODES",
    "KINDS",
    "REASONS",
    "STEPS",
    "Candidate",
    "CreateOptions",
    "CreationReport",
    "Dataset",
    "Item",
    "Made",
    "Ran",
    "Record",
    "Selection",
    "Source",
    "StateError",
    "StateFile",
    "StepCost",
    "StepOutcome",
    "SuiteRequest",
    "TasksRequest",
    "candidates",
    "create_suite",
    "create_variants",
    "load_source",
    "make_suite",
    "make_tasks",
    "select_cases",
    "side_effects",
]
