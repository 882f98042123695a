"""JSON Schemas of the method tools: each parameter typed from the method's visible examples only.

A client builds its forms, its coercions and its model's function declarations from a tool's input schema:
the MCP Inspector turns ``--tool-arg arg0=105`` into a number only when the property says ``"type": "integer"``,
and strict modes (OpenAI's structured outputs) need every property typed. So each parameter gets the most
specific JSON type its initial examples show (never anything from the hidden tests), and ``args`` stays open
for every other value. Every node has a single ``type`` or an ``anyOf`` of single types, the form every
client reads (type arrays and untyped nodes are what the MCP Inspector reports as unportable).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from wasm_runtime import InvalidInput, parse_arguments

__all__ = ["ANY_JSON", "describe", "example_json", "nullable", "parameter_schemas", "value_schema"]

#: Nesting levels of element and value types spelled out (deeper containers are typed ``array``/``object`` only).
_DEPTH = 3

#: Any JSON value, as typed branches: for a parameter without examples.
ANY_JSON: dict[str, Any] = {
    "anyOf": [
        {"type": "string"},
        {"type": "number"},
        {"type": "boolean"},
        {"type": "array"},
        {"type": "object"},
        {"type": "null"},
    ]
}

# Python values JSON carries only as another type: how the examples' values read, and what the JSON form gives.
_CARRIED = {
    "tuple": ("tuples", "a JSON array arrives as a list"),
    "set": ("sets", "a JSON array arrives as a list"),
    "frozenset": ("frozensets", "a JSON array arrives as a list"),
    "bytes": ("bytes", "a JSON string arrives as str"),
    "bytearray": ("bytearrays", "a JSON string arrives as str"),
    "complex": ("complex numbers", "a JSON number arrives as an int or a float"),
    "non-string keys": ("dicts with non-string keys", "JSON object keys arrive as strings"),
}
_ORDER = ["null", "boolean", "integer", "number", "string", "array", "object"]
_NAMES = {
    "null": "None",
    "boolean": "a boolean",
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "array": "a list",
    "object": "an object",
}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` or null, as two ``anyOf`` branches (not a type array, which some clients cannot read)."""
    return {"anyOf": [schema, {"type": "null"}]}


def value_schema(value: Any, depth: int = 0, notes: set[str] | None = None) -> dict[str, Any]:
    """The JSON Schema of one Python value as the JSON form can give it.

    Values JSON has no type for are given the type that carries them closest (a tuple an array, bytes a
    string); ``notes`` collects what differs, for the parameter's description.
    """
    notes = notes if notes is not None else set()
    if value is None:
        return {"type": "null"}
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, complex):
        notes.add("complex")
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, (bytes, bytearray)):
        notes.add(type(value).__name__)
        return {"type": "string"}
    if isinstance(value, (list, tuple, set, frozenset)):
        if not isinstance(value, list):
            notes.add(type(value).__name__)
        schema: dict[str, Any] = {"type": "array"}
        if value and depth < _DEPTH:
            schema["items"] = _union(value_schema(item, depth + 1, notes) for item in value)
        return schema
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            notes.add("non-string keys")
        schema = {"type": "object"}
        if value and depth < _DEPTH:
            schema["additionalProperties"] = _union(value_schema(item, depth + 1, notes) for item in value.values())
        return schema
    notes.add(type(value).__name__)
    return dict(ANY_JSON)


def _branches(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return list(schema["anyOf"]) if "anyOf" in schema else [schema]


def _union(schemas: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The narrowest schema accepting every one of ``schemas``: one branch per JSON type, containers merged."""
    by_type: dict[str, dict[str, Any]] = {}
    for schema in schemas:
        for branch in _branches(schema):
            kind = branch["type"]
            known = by_type.get(kind)
            if known is None:
                by_type[kind] = dict(branch)
                continue
            for key in ("items", "additionalProperties"):
                if key in known and key in branch:
                    known[key] = _union([known[key], branch[key]])
                elif key in branch:
                    known[key] = branch[key]
    if "number" in by_type:
        by_type.pop("integer", None)  # every integer is a number
    branches = [by_type[kind] for kind in _ORDER if kind in by_type]
    if len(branches) == 1:
        return branches[0]
    return {"anyOf": branches}


def describe(schema: dict[str, Any]) -> str:
    """A schema in words: ``an integer``, ``a list of strings``, ``an integer or None``."""
    words = []
    for branch in _branches(schema):
        kind = branch["type"]
        text = _NAMES[kind]
        if kind == "array" and "items" in branch:
            text = f"a list of {_plural(describe(branch['items']))}"
        elif kind == "object" and "additionalProperties" in branch:
            text = f"an object of {_plural(describe(branch['additionalProperties']))}"
        words.append(text)
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _plural(text: str) -> str:
    """``an integer or a list of strings`` -> ``integers or lists of strings``."""
    out = []
    for part in re.split(r", | or ", text):
        if part != "None":
            head, _, rest = part.split(" ", 1)[1].partition(" ")
            part = f"{head}s {rest}".strip()
        out.append(part)
    return out[0] if len(out) == 1 else ", ".join(out[:-1]) + " or " + out[-1]


def parameter_schemas(params: Sequence[str], examples: Iterable[str]) -> dict[str, dict[str, Any]]:
    """One property schema per parameter, typed from the examples' argument literals.

    Args:
        params: The parameter names, in order.
        examples: The initial examples' input literals (what the tool description shows).
    """
    seen: list[list[dict[str, Any]]] = [[] for _ in params]
    notes: list[set[str]] = [set() for _ in params]
    for literal in examples:
        try:
            args = parse_arguments(literal)
        except InvalidInput:
            continue
        if len(args) != len(params):
            continue
        for i, value in enumerate(args):
            seen[i].append(value_schema(value, notes=notes[i]))
    out: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(params):
        if seen[i]:
            schema = _union(seen[i])
            text = f"parameter {name}: {describe(schema)}, as the examples show"
        else:
            schema = dict(ANY_JSON)
            text = f"parameter {name}: any JSON value"
        if notes[i]:
            kinds = sorted(notes[i])
            shown = [_CARRIED.get(k, (f"{k} values", "JSON cannot carry them"))[0] for k in kinds]
            why = sorted({_CARRIED.get(k, ("", "JSON cannot carry them"))[1] for k in kinds})
            text += f". The examples pass {', '.join(shown)} ({'; '.join(why)}): use `args` to pass them exactly"
        else:
            text += "; for any other value use `args`"
        out[name] = {**schema, "description": text}
    return out


def _placeholder(schema: dict[str, Any]) -> Any:
    """A JSON value the schema accepts (for examples in messages)."""
    kind = _branches(schema)[0]["type"]
    return {"null": None, "boolean": True, "integer": 1, "number": 1.5, "string": "a", "array": [], "object": {}}[kind]


def example_json(params: Sequence[str], schemas: dict[str, dict[str, Any]]) -> str:
    """A JSON-form example call: one accepted value per parameter."""
    return json.dumps({name: _placeholder(schemas[name]) for name in params})
