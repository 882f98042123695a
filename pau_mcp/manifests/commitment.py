"""Public commitments to a private suite: proof, once it is revealed, that it is the suite committed to on a date.

A private split is only as good as the trust that it was not changed after the models were scored. Before scoring,
the operator publishes a commitment (``pau-mcp manifests commit``): for each method, each task and ``suite.json``,
a salted SHA-256 of its canonical JSON, one digest over all of them for the suite, the suite's creation date and
the date of the commitment. After the contest the suite and the salt are revealed, and anyone can check
(``pau-mcp manifests verify``) that the suite is the committed one; a method, task or ``suite.json`` that differs
is named.

What a commitment shows: the suite's name, its method and task ids (so their number), its creation and commitment
dates, and 64-hex-digit digests. Without the salt (32 random bytes kept with the operator), a digest tells nothing
of what it covers: no source, gold description, input or output can be tried against it. Every digest is
``SHA-256(salt || 0 || kind || 0 || id || 0 || canonical JSON)``: the kind and id make two equal methods digest
differently, so a commitment does not even show which methods are alike. Canonical JSON is the manifest as
``model_dump(mode="json", exclude_none=True)`` gives it, keys sorted, no spaces, UTF-8: the file's layout, key order
and whitespace do not matter, every value does (one changed byte of a value changes the digest).

A commitment proves what was committed, not when: publish it where its date is witnessed (a signed git tag, a
post, an RFC 3161 timestamp) before any model is scored on the suite.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..userfiles import UnreadableFile, printable, read_text
from .store import ManifestError, Suite

__all__ = [
    "FORMAT",
    "SALT_FILE",
    "Commitment",
    "Verification",
    "commit_suite",
    "new_salt",
    "read_commitment",
    "read_salt",
    "verdict_lines",
    "verify_suite",
    "write_salt",
]

#: What a commitment file says it is.
FORMAT: Literal["pau-mcp suite commitment 1"] = "pau-mcp suite commitment 1"
#: Where the salt is kept by default: in the suite's directory (revealed with it), never in the commitment.
SALT_FILE = "commitment.salt"
_ALGORITHM = "sha256(salt || 0x00 || kind || 0x00 || id || 0x00 || canonical JSON), hex"
_SALT_BYTES = 32
_MAX_COMMITMENT_BYTES = 64 * 1024 * 1024
_DIGEST = r"^[0-9a-f]{64}$"  # checked by pydantic's regex engine (Rust's: linear time)


class Commitment(BaseModel):
    """A commitment file: digests only, and the dates."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["pau-mcp suite commitment 1"] = FORMAT
    suite: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,63}$")
    committed: datetime
    created: datetime | None = None
    algorithm: str = _ALGORITHM
    suite_digest: str = Field(pattern=_DIGEST)
    info_digest: str = Field(pattern=_DIGEST, description="suite.json's digest")
    methods: dict[str, str] = Field(description="method id -> digest")
    tasks: dict[str, str] = Field(default_factory=dict, description="task id -> digest")

    def dump(self) -> str:
        """The file's text."""
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=False) + "\n"


@dataclass
class Verification:
    """What ``verify_suite`` found: every part that differs from the commitment, by name.

    Attributes:
        differ: Methods and tasks whose digest differs (changed since the commitment).
        missing: Committed methods and tasks the suite lacks.
        added: Methods and tasks of the suite the commitment does not list.
        info_differs: ``suite.json`` differs.
        checked: Methods and tasks compared.
    """

    differ: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    info_differs: bool = False
    checked: int = 0

    @property
    def matches(self) -> bool:
        """True when the suite is exactly the committed one."""
        return not (self.differ or self.missing or self.added or self.info_differs)


def canonical(value: Any) -> bytes:
    """The canonical JSON of a manifest's data: keys sorted, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _digest(salt: bytes, kind: str, name: str, body: bytes) -> str:
    return hashlib.sha256(b"\0".join([salt, kind.encode(), name.encode(), body])).hexdigest()


def _parts(suite: Suite, salt: bytes) -> tuple[str, dict[str, str], dict[str, str]]:
    info = _digest(salt, "suite.json", suite.name, canonical(suite.info.model_dump(mode="json", exclude_none=True)))
    methods = {
        mid: _digest(salt, "method", mid, canonical(m.model_dump(mode="json", exclude_none=True)))
        for mid, m in sorted(suite.methods.items())
    }
    tasks = {
        tid: _digest(salt, "task", tid, canonical(t.model_dump(mode="json", exclude_none=True)))
        for tid, t in sorted(suite.tasks.items())
    }
    return info, methods, tasks


def _suite_digest(salt: bytes, name: str, info: str, methods: dict[str, str], tasks: dict[str, str]) -> str:
    return _digest(salt, "suite", name, canonical({"info": info, "methods": methods, "tasks": tasks}))


def new_salt() -> bytes:
    """32 random bytes."""
    return secrets.token_bytes(_SALT_BYTES)


def commit_suite(suite: Suite, salt: bytes, when: datetime) -> Commitment:
    """The commitment to ``suite`` as it is now.

    Args:
        suite: The suite, loaded (every file validated).
        salt: The operator's secret salt (``new_salt``), revealed with the suite.
        when: The commitment's date (timezone-aware).
    """
    info, methods, tasks = _parts(suite, salt)
    return Commitment(
        suite=suite.name, committed=when, created=suite.info.created,
        suite_digest=_suite_digest(salt, suite.name, info, methods, tasks), info_digest=info, methods=methods,
        tasks=tasks,
    )  # fmt: skip


def verify_suite(suite: Suite, commitment: Commitment, salt: bytes) -> Verification:
    """Compare a revealed suite with a commitment, part by part.

    Raises:
        ManifestError: The commitment is for another suite.
    """
    if commitment.suite != suite.name:
        raise ManifestError(f"the commitment is for suite {commitment.suite!r}, not {suite.name!r}")
    info, methods, tasks = _parts(suite, salt)
    found = Verification(info_differs=info != commitment.info_digest)
    for ours, theirs in ((methods, commitment.methods), (tasks, commitment.tasks)):
        found.checked += len(set(ours) & set(theirs))
        found.differ += sorted(k for k in set(ours) & set(theirs) if ours[k] != theirs[k])
        found.missing += sorted(set(theirs) - set(ours))
        found.added += sorted(set(ours) - set(theirs))
    return found


def read_commitment(path: Path) -> Commitment:
    """A commitment file, validated (it may come from anyone: read with a cap, every field checked).

    Raises:
        ManifestError: It cannot be read or is not a commitment; the message names the file and what is wrong.
    """
    try:
        text = read_text(path, limit=_MAX_COMMITMENT_BYTES)
        return Commitment.model_validate_json(text)
    except UnreadableFile as exc:
        raise ManifestError(str(exc)) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(file)"
        raise ManifestError(f"{path}: not a suite commitment ({where}: {first['msg']})") from None


def read_salt(path: Path) -> bytes:
    """The salt in a salt file (hex text).

    Raises:
        ManifestError: The file is missing or holds no salt.
    """
    try:
        text = read_text(path, limit=1024).strip()
        salt = bytes.fromhex(text)
    except UnreadableFile as exc:
        raise ManifestError(
            f"{exc}: the salt is revealed with the suite (in its folder as {SALT_FILE}); give its file with --salt"
        ) from None
    except ValueError:
        raise ManifestError(f"{path}: not a salt (hex digits)") from None
    if len(salt) < 16:
        raise ManifestError(f"{path}: a salt of {len(salt)} bytes is too short to hide anything (32 are made)")
    return salt


def write_salt(path: Path, salt: bytes) -> None:
    """Write a salt file only its owner can read, atomically; an existing one is never replaced."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(salt.hex() + "\n")


def verdict_lines(found: Verification, commitment: Commitment) -> list[str]:
    """The verification as text lines: the verdict, then every part that differs, by name."""
    when = commitment.committed.isoformat()
    if found.matches:
        return [
            f"suite {commitment.suite} is the one committed to on {when}: {len(commitment.methods)} methods, "
            f"{len(commitment.tasks)} tasks and suite.json match"
        ]
    out = [
        f"suite {commitment.suite} is NOT the one committed to on {when}:"
    ]  # names below are the file's: shown safely
    if found.info_differs:
        out.append("  suite.json differs")
    out += [f"  differs: {name}" for name in found.differ]
    out += [f"  missing (committed, not in the suite): {printable(name)}" for name in found.missing]
    out += [f"  added (in the suite, not committed): {name}" for name in found.added]
    if found.checked and len(found.differ) == found.checked and found.info_differs:
        out.append("  every part differs: is this the salt the commitment was made with?")
    return out
