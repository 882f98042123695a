"""Importers: datasets (PAU, HumanEval, CodeARC, your own Python files) turned into suites.

Each importer reads its dataset on the host with ``ast`` and JSON only, and
hands drafts to ``build_suite``, which anonymises, freezes and validates them
in the sandbox, refuses failures with reasons, and writes the suite.
"""

from .anonymise import ENTRY, Anonymised, CannotAnonymise, anonymise, docstring_of
from .codearc import import_codearc
from .common import (
    DatasetUnavailable,
    Disagreement,
    Draft,
    ImportReport,
    ImportTargetError,
    Probe,
    Progress,
    Recorded,
    Refusal,
    build_suite,
    description_from_docstring,
)
from .humaneval import import_humaneval
from .pau import import_pau, reference_arguments
from .python_files import import_python
from .slicing import Slice, slice_function

__all__ = [
    "ENTRY",
    "Anonymised",
    "CannotAnonymise",
    "DatasetUnavailable",
    "Disagreement",
    "Draft",
    "ImportReport",
    "ImportTargetError",
    "Probe",
    "Progress",
    "Recorded",
    "Refusal",
    "Slice",
    "anonymise",
    "build_suite",
    "description_from_docstring",
    "docstring_of",
    "import_codearc",
    "import_humaneval",
    "import_pau",
    "import_python",
    "reference_arguments",
    "slice_function",
]
