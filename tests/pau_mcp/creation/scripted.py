"""A scripted creation model for ``tests/fakellm.py``: it answers each request of the pipeline from a table.

The pipeline asks for a validator, inputs and a description, and the scorer's code writer asks for code; this
responder tells them apart by their wording, finds the function a request is about by a marker in its fenced
source (a constant only that function uses), and answers as that function's ``Known`` says. The code writer's
request carries only the header and the description, so each ``Known`` names a phrase its descriptions contain.
Functions are answered by content, not by queue order, so requests may come in any order (the pipeline works on
several functions at once).
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from fakellm import Failure

__all__ = ["Known", "ScriptedModel"]


@dataclass
class Known:
    """How the scripted model answers about one function.

    Attributes:
        marker: Text only this function's source holds (a constant such as ``1001``).
        calls: The calls it proposes, as argument literals (``"(3,)"``); None answers with no call at all.
        description: The description it writes ("" for a reply without one).
        phrase: Text its descriptions (the model's and the dataset's) contain, by which the code writer knows it.
        code: What the code writer writes from such a description.
        validator: The validator's body (default: accept everything), or a whole reply when it starts with "RAW:".
        fail: Steps whose requests get a 400 (``validator``, ``inputs``, ``describe``).
    """

    marker: str
    calls: list[str] | None
    description: str
    phrase: str
    code: str
    validator: str = "return None"
    fail: tuple[str, ...] = ()


@dataclass
class ScriptedModel:
    """The responder: ``FakeLLM(ScriptedModel([...]))``.

    Attributes:
        asked: Requests answered, by (step, marker) (``coder`` requests by phrase).
        hold: When set, a request about this marker waits on ``release`` after setting ``reached`` (for kill tests).
    """

    known: list[Known]
    asked: Counter[tuple[str, str]] = field(default_factory=Counter)
    hold: str | None = None
    reached: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def _about(self, text: str) -> Known | None:
        # A file's other functions come along as helpers: the marker is looked for in test_func's own body.
        source = text.split("<source-", 1)[-1]
        body = source.split("def test_func(", 1)[-1].split("\ndef ", 1)[0]
        return next((k for k in self.known if k.marker in body), None)

    def __call__(self, body: dict[str, Any]) -> str | Failure:
        text = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        if "Write the Python function described below" in text:
            known = next((k for k in self.known if k.phrase and k.phrase in text), None)
            self.asked["coder", known.marker if known else "?"] += 1
            return (
                f"```python\n{known.code}\n```" if known else "```python\ndef test_func(*args):\n    return None\n```"
            )
        step = "validator" if "Write an input check" in text else "inputs" if "Propose inputs" in text else "describe"
        known = self._about(text)
        if known is None:
            return Failure(400, f"scripted model: no function known for a {step} request")
        self.asked[step, known.marker] += 1
        if self.hold is not None and known.marker == self.hold:
            self.reached.set()
            self.release.wait(60)
        if step in known.fail:
            return Failure(400, f"scripted refusal of the {step} request")
        if step == "validator":
            if known.validator.startswith("RAW:"):
                return known.validator[4:]
            header = re.search(r"def validate_input_args\(([^)]*)\):", text)
            params = header.group(1) if header else "*args"
            return f"```python\ndef validate_input_args({params}):\n    {known.validator}\n```"
        if step == "inputs":
            if known.calls is None:
                return "I would rather not propose inputs."
            return "Reasoning: typical values and the boundaries\n" + "\n".join(f"- test_func{c}" for c in known.calls)
        return known.description
