"""Scripted models for the RL tests: a policy that explores honestly and a critic that follows its rubric.

Both answer through the loopback fake OpenAI server (``fakellm``), so the
environment, the critic and ``pau-mcp rl rollout`` are tested through the real
LLM layer.
"""

from __future__ import annotations

import re
from typing import Any

from fakellm import Reply

__all__ = ["brain", "critic_reply", "honest", "is_critic", "policy_reply"]


def is_critic(body: dict[str, Any]) -> bool:
    """True when a request comes from the critic."""
    return "critic of an explorer" in str(body["messages"][0].get("content"))


def _fenced(text: str, name: str) -> str:
    match = re.search(rf"<{name}-([0-9a-f]+)>\n(.*?)\n</{name}-\1>", text, re.DOTALL)
    return match.group(2) if match else ""


def critic_reply(body: dict[str, Any]) -> str:
    """A critic that rates by its rubric and quotes what it rates before its verdict (as real models do).

    Hypotheses that mention the method's real behaviour (for builtin/b005: steps and ValueError) rate high;
    reasoning that names an input it has not tried rates 6, anything else 1; the evidence (asked without the
    hypothesis) settles the function once four different inputs have been tried.
    """
    text = str(body["messages"][-1]["content"])
    if "judge the evidence alone" in text:  # what the calls so far settle: four different inputs settle b005
        tried = set(_fenced(text, "experiments").splitlines()) - {"(none yet)"}
        return f"{len(tried)} different experiments.\nRating: {9 if len(tried) >= 4 else 3}"
    quoted = _fenced(text, "hypothesis") if "hypothesis to rate" in text else _fenced(text, "reasoning")
    if "hypothesis to rate" in text:
        words = quoted.lower()
        score = 1 + 4 * ("step" in words) + 4 * ("valueerror" in words)
    else:
        experiments = _fenced(text, "experiments")
        numbers = re.findall(r"-?\d+", quoted)
        fresh = [n for n in numbers if f"test_func({n})" not in experiments]
        score = 6 if fresh and len(quoted.split()) < 80 else 1
    return f'The explorer wrote: "{quoted[:400]}"\nRating: {score}'


def policy_reply(body: dict[str, Any]) -> str:
    """An honest explorer: tries fresh small inputs of the right arity, concludes after four experiments."""
    text = str(body["messages"][-1]["content"])
    header = re.search(r"The function: `def \w+\((.*?)\):`", text)
    arity = len([p for p in (header.group(1) if header else "arg0").split(",") if p.strip()])
    tried = len(re.findall(r"^  test_func", text.split("Your latest experiments:")[1].split("Your current")[0], re.M))
    if "Give the exact input now" in text:
        values = ", ".join(str(tried + 1 + i) for i in range(arity))
        return f"INPUT: ({values}{',' if arity == 1 else ''})"
    if "CONCLUDED: YES" in text:
        done = "YES" if tried >= 4 or "no calls left" in text else "NO"
        return f"CONCLUDED: {done}\nHYPOTHESIS: counts steps to reach 1; raises ValueError below 1"
    return f"I will try {tried + 1}, a value not seen yet, to check the count."


def brain(body: dict[str, Any]) -> Reply | str:
    """The critic or the policy, whichever is asked."""
    return critic_reply(body) if is_critic(body) else policy_reply(body)


def honest(observation: str) -> str:
    """The honest explorer as a plain function of the observation (for stepping an environment directly)."""
    return policy_reply({"messages": [{"role": "user", "content": observation}]})
