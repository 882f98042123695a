"""Argument tuples drawn to look like a method's published ones: the same types and shapes, other values.

A deployment that serves initial examples of its own (``examples``) needs inputs the method accepts, and must not
take them from the hidden tests. The published examples are public, so their types and shapes may be reused. Each
draw takes one published argument tuple as its template and makes a new value of the same type for each argument,
in one of three ways (``WAYS``), from the farthest from the template to the nearest:

- ``fresh``: the same type and container shape, new contents of sizes that do not depend on the template's (so a
  draw's size says nothing of which published input it was drawn from): integers of 1 to 3 digits, strings of the
  same kinds of characters (words stay words, in the same case), containers whose items are drawn like the
  template's items (sorted where every template is sorted, without repeats where no template repeats, rows of one
  length where the template's rows have one length); relations the templates show between arguments (an anagram,
  a word of another, a key of a dict argument, an index into a list) are kept about half of the time;
- ``shaped``: the template's exact form with new contents: each run of digits a number in the range the templates
  show at that place (``'2024-03-10'`` stays date-like), each letter another of its case, a run of hex digits
  other hex digits, other characters kept; containers keep their sizes;
- ``nearby``: the template with a small edit to each argument (a number moved by one or two, one item or
  character changed, added or removed), for methods that accept little else; the draw stays close to a published
  input, and so says more of it.

Nothing here runs code: whether a method accepts a draw is found by running it (``examples``). Values are built
from the generator alone, so the same generator state gives the same draws on every machine; sets are written
with their items in a fixed order (``literal``), since their own order depends on the process's string hashing.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

__all__ = ["WAYS", "draw_inputs", "literal"]

#: The ways of drawing, from the farthest from the published inputs to the nearest.
WAYS: tuple[str, ...] = ("fresh", "shaped", "nearby")

#: Containers nested deeper than this keep the template's value (no published example nests this deep).
_DEPTH = 6
#: Sizes of fresh values, the same whatever the template's: a drawn value's size says nothing of the published one's.
_DIGITS = (1, 1, 2, 2, 3)  # integers' and reals' digits before the point
_TEXT = (1, 10)  # characters of a string without spaces
_WORD, _WORDS = (1, 8), (1, 5)  # characters of a word, words of a text
_ITEMS, _KEYS = (0, 7), (0, 4)  # items of a list, tuple or set; keys of a dict
_RUNS = re.compile(r"[0-9]+|[A-Za-z]+|[^0-9A-Za-z]+")
_ALNUM = re.compile(r"[0-9A-Za-z]+")
_HEX = frozenset("0123456789abcdefABCDEF")


def literal(args: tuple[Any, ...]) -> str:
    """The argument tuple as a Python literal, sets written with their items in sorted order, so that the text is
    the same in every process (a set's own order follows string hashing, which differs between processes)."""
    inner = ", ".join(_source(value) for value in args)
    return f"({inner},)" if len(args) == 1 else f"({inner})"


def _source(value: Any) -> str:
    if isinstance(value, (set, frozenset)):
        items = sorted(_source(item) for item in value)
        if not items:
            return "set()" if isinstance(value, set) else "frozenset()"
        body = "{" + ", ".join(items) + "}"
        return body if isinstance(value, set) else f"frozenset({body})"
    if isinstance(value, list):
        return "[" + ", ".join(_source(item) for item in value) + "]"
    if isinstance(value, tuple):
        return literal(value) if value else "()"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_source(k)}: {_source(v)}" for k, v in value.items()) + "}"
    return repr(value)


def draw_inputs(
    templates: Sequence[tuple[Any, ...]], way: str, count: int, rng: random.Random
) -> list[tuple[Any, ...]]:
    """``count`` argument tuples drawn from ``templates`` in one way of ``WAYS``.

    Args:
        templates: The published argument tuples (at least one), all of the method's arity.
        way: ``fresh``, ``shaped`` or ``nearby``.
        count: How many to draw (draws may repeat one another or a template: the caller filters them).
        rng: The generator; the same state gives the same draws.

    Raises:
        ValueError: an unknown way, or no templates.
    """
    if way not in WAYS:
        raise ValueError(f"unknown way of drawing {way!r}; choose among {', '.join(WAYS)}")
    if not templates:
        raise ValueError("drawing inputs needs at least one published argument tuple")
    relations = _relations(templates)
    draws = []
    for _ in range(count):
        template = templates[rng.randrange(len(templates))]
        drawn = [_draw(value, [t[i] for t in templates], way, rng, 0) for i, value in enumerate(template)]
        if way != "nearby":
            for source, target, kind in relations:
                if rng.random() < 0.5:
                    related = _related(kind, drawn[source], template[target], rng)
                    if type(related) is type(template[target]):  # a relation the template shows by chance may not fit
                        drawn[target] = related
        draws.append(tuple(drawn))
    return draws


# -- relations between arguments ----------------------------------------------------------------------------


def _words(value: Any) -> list[str]:
    return value.split() if isinstance(value, str) else []


def _relation(a: Any, b: Any) -> str | None:
    """How argument ``b`` derives from argument ``a`` in a template, if it visibly does: ``anagram`` (the same
    characters), ``word`` (one of its words), ``part`` (a piece of it), ``members`` (some of its items or words),
    ``member`` (one of its items or keys) or ``index`` (a position in it)."""
    if isinstance(a, str) and isinstance(b, str) and a != b and b:
        if sorted(a) == sorted(b):
            return "anagram"
        if b in _words(a):
            return "word"
        if b in a:
            return "part"
        return None
    if isinstance(a, (str, list, tuple, set, frozenset, dict)) and a:
        items = _words(a) if isinstance(a, str) else _items(a)
        try:
            if isinstance(b, (list, tuple, set, frozenset)) and b and all(x in items for x in b):
                return "members"
            if not isinstance(a, str) and not isinstance(b, bool) and b in items:
                return "member"
        except TypeError:  # unhashable items looked up in a dict or set
            return None
        if type(b) is int and isinstance(a, (str, list, tuple)) and 0 <= b < len(a):
            return "index"
    return None


def _relations(templates: Sequence[tuple[Any, ...]]) -> list[tuple[int, int, str]]:
    """Every relation some template shows between two of its arguments, as (from, to, kind)."""
    found: list[tuple[int, int, str]] = []
    for template in templates:
        for source, a in enumerate(template):
            for target, b in enumerate(template):
                kind = _relation(a, b) if source != target else None
                if kind is not None and (source, target, kind) not in found:
                    found.append((source, target, kind))
    return found


def _related(kind: str, value: Any, template: Any, rng: random.Random) -> Any:
    """An argument drawn from another argument's drawn ``value`` as the template's relation says; None when the
    drawn value cannot give one (of another type, or empty)."""
    if kind == "anagram" and isinstance(value, str) and value:
        letters = list(value)
        rng.shuffle(letters)
        return "".join(letters)
    if kind in ("word", "part") and isinstance(value, str) and value:
        if kind == "word" and _words(value):
            return rng.choice(_words(value))
        length = rng.randint(1, max(1, min(len(value), len(template))))
        start = rng.randrange(len(value) - length + 1)
        return value[start : start + length]
    if not isinstance(value, (str, list, tuple, set, frozenset, dict)) or not value:
        return None
    items = _words(value) if isinstance(value, str) else _items(value)
    if not items:
        return None
    if kind == "members" and isinstance(template, (list, tuple, set, frozenset)):
        chosen = [rng.choice(items) for _ in range(max(1, len(template)))]
        try:
            return type(template)(chosen)
        except TypeError:
            return None
    if kind == "member" and not isinstance(value, str):
        return rng.choice(items)
    if kind == "index" and isinstance(value, (str, list, tuple)):
        return rng.randrange(len(value))
    return None


def _same_type(value: Any, peers: Sequence[Any]) -> list[Any]:
    kind = type(value)
    return [peer for peer in peers if type(peer) is kind] or [value]


def _draw(value: Any, peers: Sequence[Any], way: str, rng: random.Random, depth: int) -> Any:
    """A value of ``value``'s type drawn in ``way``; ``peers`` are the values at the same place in every template."""
    if value is None or depth > _DEPTH:
        return value
    if isinstance(value, bool):
        return (not value) if way == "nearby" else rng.random() < 0.5
    same = _same_type(value, peers)
    if isinstance(value, int):
        return _integer(value, same, way, rng)
    if isinstance(value, float):
        return _real(value, same, way, rng)
    if isinstance(value, complex):
        reals = [p.real for p in same]
        imaginaries = [p.imag for p in same]
        return complex(_real(value.real, reals, way, rng), _real(value.imag, imaginaries, way, rng))
    if isinstance(value, str):
        return _text(value, same, way, rng)
    if isinstance(value, (bytes, bytearray)):
        drawn = _text(value.decode("latin-1"), [bytes(p).decode("latin-1") for p in same], way, rng)
        return type(value)(drawn.encode("latin-1"))
    if isinstance(value, (list, tuple, set, frozenset)):
        return _container(value, same, way, rng, depth)
    if isinstance(value, dict):
        return _mapping(value, same, way, rng, depth)
    return value  # a literal of another kind (Ellipsis): kept


# -- numbers ------------------------------------------------------------------------------------------------


def _negative(value: int | float, peers: Sequence[int | float], rng: random.Random) -> bool:
    """Whether a fresh number is negative: as often as the templates' are, and now and then when none is."""
    share = sum(1 for p in peers if p < 0) / len(peers) if peers else 0.0
    return rng.random() < max(share, 0.1)


def _integer(value: int, peers: Sequence[int], way: str, rng: random.Random) -> int:
    if way == "nearby":
        return value + rng.choice((-2, -1, 1, 2))
    if way == "shaped":
        low, high = min(peers), max(peers)
        return rng.randint(low - abs(low) // 2 - 1, high + abs(high) // 2 + 1)
    digits = rng.choice(_DIGITS)
    number = rng.randrange(10 ** (digits - 1) if digits > 1 else 0, 10**digits)
    return -number if number and _negative(value, peers, rng) else number


def _decimals(value: float) -> int:
    text = repr(value)
    if "e" in text or "." not in text:
        return 2
    return max(1, min(3, len(text.split(".", 1)[1])))


def _real(value: float, peers: Sequence[float], way: str, rng: random.Random) -> float:
    places = _decimals(value)
    if way == "nearby":
        drawn = value + rng.choice((-1, 1)) * rng.uniform(0.1, 1.0)
    elif way == "shaped":
        low, high = min(peers), max(peers)
        drawn = rng.uniform(low - abs(low) / 2 - 1, high + abs(high) / 2 + 1)
    else:
        drawn = rng.uniform(0, 10 ** rng.choice(_DIGITS))
        drawn = -drawn if _negative(value, peers, rng) else drawn
    drawn = round(drawn, places)
    return drawn if drawn != 0 else 0.0  # never -0.0


# -- text ---------------------------------------------------------------------------------------------------


def _kinds(text: str) -> list[str]:
    """The characters ``text`` is made of, by kind: each kind's alphabet (letters and digits as whole classes,
    anything else as the very characters used)."""
    alphabets = []
    if any(c in string.ascii_lowercase for c in text):
        alphabets.append(string.ascii_lowercase)
    if any(c in string.ascii_uppercase for c in text):
        alphabets.append(string.ascii_uppercase)
    if any(c in string.digits for c in text):
        alphabets.append(string.digits)
    others = sorted({c for c in text if c not in string.ascii_letters and c not in string.digits and c != " "})
    if others:
        alphabets.append("".join(others))
    return alphabets


def _like(char: str, rng: random.Random) -> str:
    """Another character of ``char``'s kind (a letter of its case, a digit); any other character itself."""
    for alphabet in (string.ascii_lowercase, string.ascii_uppercase, string.digits):
        if char in alphabet:
            return rng.choice(alphabet)
    return char


def _word(template: str, rng: random.Random) -> str:
    """A fresh word like ``template``: about as long, of the same kinds of characters, in the same case pattern."""
    length = rng.randint(*_WORD)
    alphabets = _kinds(template) or [string.ascii_lowercase]
    if template[:1].isupper() and template[1:].islower():  # Title case stays Title case
        return rng.choice(string.ascii_uppercase) + "".join(
            rng.choice(string.ascii_lowercase) for _ in range(length - 1)
        )
    return "".join(rng.choice(rng.choice(alphabets)) for _ in range(length))


def _text(value: str, peers: Sequence[str], way: str, rng: random.Random) -> str:
    if way == "nearby":
        return _edit_text(value, rng)
    if way == "shaped":
        return _shaped_text(value, peers, rng)
    if " " in value.strip():
        # Words: as many as the template's, give or take one, each like one of the templates' words.
        words = [w for peer in peers for w in peer.split()] or ["a"]
        count = rng.randint(*_WORDS)
        return " ".join(_word(rng.choice(words), rng) for _ in range(count))
    if not value:
        return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(0, 4)))
    alphabets = _kinds(value) or [string.ascii_lowercase]
    length = rng.randint(*_TEXT)
    return "".join(rng.choice(rng.choice(alphabets)) for _ in range(length))


def _hex(peers: Sequence[str]) -> bool:
    """True when the templates' letters and digits are hex numbers (``'#ff8000'``, ``'#1A2B3C'``)."""
    stretches = [s for peer in peers for s in _ALNUM.findall(peer)]
    return (
        any(c.isalpha() for s in stretches for c in s)  # letters among the digits: hex, not plain numbers
        and all(set(s) <= _HEX and any(c.isdigit() for c in s) for s in stretches)
    )


def _shape(text: str) -> list[str]:
    """The kinds of ``text``'s runs, e.g. ``['digits', '-', 'digits']`` for ``'2024-03'``: which templates align."""
    return ["digits" if run.isdigit() else "letters" if run.isalpha() else run for run in _RUNS.findall(text)]


def _shaped_text(value: str, peers: Sequence[str], rng: random.Random) -> str:
    if _hex(peers):
        # Hex digits stay hex digits of their case, each run as long as it was.
        return _ALNUM.sub(lambda m: _hex_digits(m.group(), rng), value)
    runs = _RUNS.findall(value)
    aligned = [_RUNS.findall(p) for p in peers if _shape(p) == _shape(value)] or [runs]
    out = []
    for index, run in enumerate(runs):
        if run.isdigit():
            numbers = [int(r[index]) for r in aligned]
            low, high = min(numbers), max(numbers)
            number = rng.randint(low - low // 2, high + high // 2 + 1)
            if len({len(r[index]) for r in aligned}) == 1:  # a field of one width ('03', '2024') keeps its width
                out.append(str(number % 10 ** len(run)).zfill(len(run)))
            else:
                out.append(str(number))
        else:
            out.append("".join(_like(c, rng) for c in run))
    return "".join(out)


def _hex_digits(run: str, rng: random.Random) -> str:
    alphabet = "0123456789ABCDEF" if any(c.isupper() for c in run) else "0123456789abcdef"
    return "".join(rng.choice(alphabet) for _ in run)


def _edit_text(value: str, rng: random.Random) -> str:
    if not value:
        return rng.choice(string.ascii_lowercase)
    index = rng.randrange(len(value))
    choice = rng.randrange(3)
    if choice == 0:  # change one character to another of its kind
        changed = _like(value[index], rng)
        if changed == value[index]:
            changed = rng.choice(_kinds(value)[0]) if _kinds(value) else value[index]
        return value[:index] + changed + value[index + 1 :]
    if choice == 1 and len(value) > 1:  # drop one
        return value[:index] + value[index + 1 :]
    return value[: index + 1] + value[index] + value[index + 1 :]  # repeat one


# -- containers ---------------------------------------------------------------------------------------------


def _items(container: Any) -> list[Any]:
    """A container's items in a fixed order (a set's own order follows string hashing)."""
    if isinstance(container, (set, frozenset)):
        return sorted(container, key=_source)
    return list(container)


def _ordered(values: Sequence[Any], reverse: bool) -> bool:
    try:
        return all((b <= a) if reverse else (a <= b) for a, b in zip(values, values[1:], strict=False))
    except TypeError:
        return False


def _distinct(items: Sequence[Any]) -> bool:
    return len({_source(x) for x in items}) == len(items)


def _without_repeats(items: Sequence[Any]) -> list[Any]:
    seen: set[str] = set()
    kept = []
    for item in items:
        text = _source(item)
        if text not in seen:
            seen.add(text)
            kept.append(item)
    return kept


def _sorted_like(items: list[Any], peers: Sequence[Any]) -> list[Any]:
    """``items`` sorted as every template is (ascending or descending), else as drawn."""
    for reverse in (False, True):
        if _rule(peers, partial(_ordered, reverse=reverse), 2):
            try:
                return sorted(items, reverse=reverse)
            except TypeError:
                return items
    return items


def _rule(peers: Sequence[Any], test: Callable[[list[Any]], bool], at_least: int) -> bool:
    """True when every peer long enough to tell has the property (and at least one is)."""
    telling = [_items(p) for p in peers if len(p) >= at_least]
    return bool(telling) and all(test(items) for items in telling)


def _rows(container: Sequence[Any]) -> int | None:
    """The one length of a container's rows (``[[1, 2], [3, 4]]``: 2), or None when they are not rows of one length."""
    rows = list(container)
    if len(rows) < 2 or not all(isinstance(r, (list, tuple)) for r in rows):
        return None
    lengths = {len(r) for r in rows}
    return lengths.pop() if len(lengths) == 1 else None


def _container(value: Any, peers: Sequence[Any], way: str, rng: random.Random, depth: int) -> Any:
    kind = type(value)
    pool = [item for peer in peers for item in _items(peer)]
    items = _items(value)
    if way == "nearby":
        drawn = _edit_items(items, pool, rng, depth)
    elif way == "shaped":
        drawn = [_draw(item, pool, way, rng, depth + 1) for item in items]
    else:
        size = rng.randint(*_ITEMS) if pool else 0
        drawn = [_draw(rng.choice(pool), pool, way, rng, depth + 1) for _ in range(size)] if pool else []
        width = _rows(items)
        if width is not None:
            drawn = [_fit(row, width, pool, rng, depth) for row in drawn]
        if _rule(peers, _distinct, 3):
            drawn = _without_repeats(drawn)
    if kind in (list, tuple) and way != "nearby":
        drawn = _sorted_like(drawn, peers)
    return kind(drawn)


def _fit(row: Any, width: int, pool: Sequence[Any], rng: random.Random, depth: int) -> Any:
    """A drawn row cut or grown to ``width`` items, so rows of one length stay rows of one length."""
    if not isinstance(row, (list, tuple)):
        return row
    items = list(row)[:width]
    cells = [cell for r in pool if isinstance(r, (list, tuple)) for cell in r]
    while len(items) < width and cells:
        items.append(_draw(rng.choice(cells), cells, "fresh", rng, depth + 2))
    return type(row)(items)


def _edit_items(items: list[Any], pool: Sequence[Any], rng: random.Random, depth: int) -> list[Any]:
    drawn = list(items)
    choice = rng.randrange(3)
    if drawn and choice == 0:  # change one item a little
        index = rng.randrange(len(drawn))
        drawn[index] = _draw(drawn[index], pool, "nearby", rng, depth + 1)
    elif len(drawn) > 1 and choice == 1:  # drop one
        del drawn[rng.randrange(len(drawn))]
    elif pool:  # add one like the others
        drawn.insert(rng.randrange(len(drawn) + 1), _draw(rng.choice(pool), pool, "fresh", rng, depth + 1))
    return drawn


def _mapping(value: dict[Any, Any], peers: Sequence[dict[Any, Any]], way: str, rng: random.Random, depth: int) -> Any:
    keys = [k for peer in peers for k in peer]
    values = [v for peer in peers for v in peer.values()]
    if way == "shaped":
        return {_draw(k, keys, way, rng, depth + 1): _draw(v, values, way, rng, depth + 1) for k, v in value.items()}
    if way == "nearby":
        drawn = dict(value)
        if drawn and rng.random() < 0.7:
            key = rng.choice(list(drawn))
            drawn[key] = _draw(drawn[key], values, "nearby", rng, depth + 1)
        elif keys and values:
            drawn[_draw(rng.choice(keys), keys, "fresh", rng, depth + 1)] = _draw(
                rng.choice(values), values, "fresh", rng, depth + 1
            )
        return drawn
    if not keys:
        return {}
    size = rng.randint(*_KEYS)
    drawn = {}
    for _ in range(size * 3):  # drawn keys may repeat: a few tries more than needed
        if len(drawn) >= size:
            break
        key = _draw(rng.choice(keys), keys, way, rng, depth + 1)
        try:
            hash(key)
        except TypeError:
            continue
        drawn[key] = _draw(rng.choice(values), values, way, rng, depth + 1) if values else None
    return drawn
