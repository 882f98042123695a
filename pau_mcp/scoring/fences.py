"""Fences around untrusted text in prompts: tags the fenced text cannot contain, stable for caching.

A prompt that quotes an agent (its description, the calls it observed, its
trajectory) must not let that text pass for part of the prompt: a description
that closes ``</candidate>`` and adds a fake reference or a fake rating. Each
fenced text sits between ``<name-TAG>`` and ``</name-TAG>`` lines, where TAG is
the first 24 hex digits of a SHA-256 over the prompt's purpose and every text
it fences.

Why no secret key: to close its fence, a text would have to contain the tag,
and the tag is a hash of that very text; finding such a fixed point of a
96-bit hash is out of reach (about 2**96 tries), key or no key, and the tag
is never shown to whoever wrote the text. Without a key the same texts always
give the same prompt, in every process and on every machine, so the LLM
response cache answers a repeated judgement and a prompt can be rebuilt from
the run store to audit it. A text that happens to contain its tag anyway
(never seen) moves the hash on with a counter until none does.
"""

from __future__ import annotations

import hashlib

__all__ = ["TAG_CHARS", "fence", "fence_tag"]

#: Hex digits in a tag (96 bits).
TAG_CHARS = 24


def fence_tag(purpose: str, *texts: str) -> str:
    """A tag that none of ``texts`` contains, the same for the same purpose and texts.

    Args:
        purpose: What the prompt is for (``judge``, ``coder``, ...): different prompts over the same
            texts get different tags.
        texts: Every text the prompt fences.
    """
    digest = hashlib.sha256()
    for part in (purpose, *texts):
        data = part.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "big") + data)
    counter = 0
    while True:
        attempt = digest.copy()
        attempt.update(counter.to_bytes(8, "big"))
        tag = attempt.hexdigest()[:TAG_CHARS]
        if not any(tag in text for text in texts):
            return tag
        counter += 1


def fence(name: str, text: str, tag: str) -> str:
    """``text`` between a ``<name-TAG>`` line and a ``</name-TAG>`` line."""
    return f"<{name}-{tag}>\n{text}\n</{name}-{tag}>"
