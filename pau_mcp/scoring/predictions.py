"""Predictions recorded as runs, so that their scores have a home: a predictions file (this project's export or the
reference benchmark's own rows) or a suite's gold descriptions become a run of the run store."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..contract import ToolStatus
from ..manifests import ManifestError, ManifestStore, Method
from ..runstore import CallRecord, RunStore

__all__ = ["PredictionLine", "Recorded", "examples_default", "record_gold", "record_predictions", "recorded_run"]


@dataclass(frozen=True)
class Recorded:
    """The run a predictions file or the gold descriptions are recorded as, or why they cannot be.

    Attributes:
        status: ``recorded`` (a new run), ``again`` (recorded before: its submissions are scored again),
            ``usage`` (the request lacks something: the message says what to give) or ``error``.
        name: The run's name.
        run_id: The run's id (0 unless recorded).
        message: What went wrong, for ``usage`` and ``error``.
    """

    status: Literal["recorded", "again", "usage", "error"]
    name: str = ""
    run_id: int = 0
    message: str = ""


class PredictionLine(BaseModel):
    """One line of a predictions file: this project's export (with ``id``) or the reference benchmark's own rows.

    The reference's rows have no ``id`` (they are matched to methods by their gold description), count queries
    in ``n_queries``, hold ``all_examples`` as a JSON string of ``[input, output, error]`` triples, and its
    code-prediction files hold the code it extracted in ``predicted_code`` (read as ``code``: direct code).
    """

    model_config = ConfigDict(extra="allow")

    id: str | None = Field(None, min_length=1)
    predicted_description: str | None = ""
    num_queries: int | None = None
    n_queries: int | None = None
    all_examples: list[list[Any]] = Field(default_factory=list)
    code: str | None = None
    predicted_code: str | None = None
    description: str | None = None
    true_description: str | None = None
    header: str | None = None

    @field_validator("all_examples", mode="before")
    @classmethod
    def _decode(cls, value: Any) -> Any:
        if value is None:
            return []
        if isinstance(value, str):  # the reference stores the list as JSON text
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise ValueError(f"all_examples is text but not JSON ({exc.msg})") from None
        if isinstance(value, list) and any(not isinstance(e, (list, tuple)) or len(e) not in (2, 3) for e in value):
            raise ValueError("each example must be [input, output] or [input, output, error]")
        return value

    @property
    def gold(self) -> str | None:
        """The gold description the line carries (the reference's rows have one), stripped."""
        text = self.description or self.true_description
        return text.strip() if text else None


def examples_default(with_examples: bool | None, protocol: str) -> bool:
    """Whether a new file or gold run gives its code writer examples: the reference's always did."""
    return with_examples if with_examples is not None else protocol == "reference"


def recorded_run(store: RunStore, name: str) -> int | None:
    """The id of a run recorded before under ``name`` with submissions to score again, or None."""
    run_id = store.find_run(name)
    run = store.run(run_id) if run_id is not None else None
    return run.id if run is not None and run.submissions else None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _read_lines(path: Path, data: bytes) -> list[tuple[int, PredictionLine]] | Recorded:
    """The file's predictions with their line numbers, or why the file cannot be read as predictions."""
    lines: list[tuple[int, PredictionLine]] = []
    for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            lines.append((number, PredictionLine.model_validate_json(line)))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(line)"
            message = f"{path}:{number}: {where}: {first['msg'].removeprefix('Value error, ')}"
            return Recorded("error", message=message)
    if not lines:
        return Recorded("error", message=f"{path} holds no predictions (expected one JSON object per line)")
    return lines


def _match(line: PredictionLine, index: int, by_gold: dict[str, list[Method]], methods: list[Method]) -> list[Method]:
    """The methods a line without an id may be: by gold description, then header, then position in the dataset."""
    found = by_gold.get(line.gold or "", []) if line.gold else methods
    if line.header and len(found) > 1:
        found = [m for m in found if m.header == line.header.strip()]
    if len(found) > 1:
        found = [m for m in found if (m.provenance.original_id or "").endswith(f"/{index}")]
    return found


def _resolve_ids(
    path: Path, lines: list[tuple[int, PredictionLine]], suites: tuple[str, ...], manifests: ManifestStore
) -> list[str] | Recorded:
    """Each line's method id: its ``id``, or for the reference's rows the method of ``suites`` with its gold
    description (and header), a tie broken by the row's position (the importers' ``original_id``)."""
    if all(line.id for _, line in lines):
        return [str(line.id) for _, line in lines]
    if not suites:
        return Recorded(
            "usage",
            message=f"{path} has lines without an id (the reference benchmark's own layout): say which suite its rows "
            "come from with --suite, e.g. --suite pau-test (`pau-mcp import pau`)",
        )
    try:
        methods = list(manifests.methods(suites))
    except ManifestError as exc:
        return Recorded("error", message=str(exc))
    by_gold: dict[str, list[Method]] = {}
    for method in methods:
        by_gold.setdefault(method.description.strip(), []).append(method)
    ids = []
    for index, (number, line) in enumerate(lines):
        found = [] if line.id else _match(line, index, by_gold, methods)
        if not line.id and len(found) != 1:
            what = "no method" if not found else f"{len(found)} methods"
            matched = "has this line's gold description" if line.gold else "matches this line (it has no description)"
            return Recorded(
                "error",
                message=f"{path}:{number}: {what} of {', '.join(suites)} {matched}; is it the suite the predictions "
                "were made on?",
            )
        ids.append(line.id or found[0].id)
    return ids


def _record_line(store: RunStore, run_id: int, path: Path, number: int, record: PredictionLine, method_id: str) -> None:
    """One line as a session of its own: its examples as counted calls, then its submission."""
    session = store.ensure_session(run_id, f"line-{number}", "file", path.name)
    for example in record.all_examples:
        raised = len(example) > 2 and example[2] not in (None, "None")
        store.record_call(
            session,
            CallRecord(
                method_id=method_id,
                tool="import",
                arguments=_text(example[0]),
                counted=True,
                status=ToolStatus.ERROR if raised else ToolStatus.OK,
                value=None if raised else _text(example[1]),
                error_message=_text(example[2]) if raised else None,
                # The example exactly as the file holds it: the reference protocol's code writer gets it so.
                outcome={"imported": [_text(part) for part in example]},
            ),
        )
    store.record_submission(
        session, method_id, record.predicted_description or "", record.code or record.predicted_code
    )


def record_predictions(
    store: RunStore,
    path: Path,
    *,
    run_name: str | None,
    protocol: str,
    manifests: ManifestStore,
    suites: tuple[str, ...] = (),
    with_examples: bool | None = None,
) -> Recorded:
    """Record a predictions file as a run of its own, once per file content.

    Args:
        store: The run store.
        path: The predictions file (JSONL).
        run_name: The run's name (default ``file-<stem>-<hash>``).
        protocol: The protocol the run is scored under.
        manifests: The suites whose methods lines without an id are matched to.
        suites: The suites the reference's rows (lines without an id) come from.
        with_examples: Whether its code writer gets the examples (default: under the reference protocol only).
    """
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    name = run_name or f"file-{path.stem}-{digest[:8]}"
    existing = recorded_run(store, name)
    if existing is not None:
        return Recorded("again", name, existing)
    lines = _read_lines(path, data)
    if isinstance(lines, Recorded):
        return lines
    ids = _resolve_ids(path, lines, suites, manifests)
    if isinstance(ids, Recorded):
        return ids
    config = {
        "file": str(path.resolve()), "sha256": digest, "protocol": protocol,
        "with_examples": examples_default(with_examples, protocol),
    }  # fmt: skip
    run_id = store.ensure_run(name, "file", config)
    for (number, record), method_id in zip(lines, ids, strict=True):
        _record_line(store, run_id, path, number, record, method_id)
    return Recorded("recorded", name, run_id)


def record_gold(
    store: RunStore,
    suites: tuple[str, ...],
    *,
    run_name: str | None,
    protocol: str,
    manifests: ManifestStore,
    with_examples: bool | None = None,
) -> Recorded:
    """A run with one submission per method of the suites, its description the gold one (its code writer gets the
    initial examples when it records ``with_examples``, as the reference's does)."""
    name = run_name or f"gold-{'-'.join(suites)}"
    existing = recorded_run(store, name)
    if existing is not None:
        return Recorded("again", name, existing)
    try:
        methods = list(manifests.methods(suites))
    except ManifestError as exc:
        return Recorded("error", message=str(exc))
    config = {
        "suites": list(suites), "protocol": protocol, "with_examples": examples_default(with_examples, protocol),
    }  # fmt: skip
    run_id = store.ensure_run(name, "gold", config)
    session = store.ensure_session(run_id, "gold", "gold")
    for method in methods:
        store.record_submission(session, method.id, method.description, None)
    return Recorded("recorded", name, run_id)
