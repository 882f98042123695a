"""A tiny stand-in for a checkout of the reference benchmark, for tests.

It has the reference's file layout and variable names, and its placeholders
(``[HEADER]``, ``{header}`` in f-strings, ``[STOP]``), but none of its text:
each prompt is a short marker (``REASON``, ``ACT``, ...) a scripted model can
recognise. This repository never holds the reference's wording, tests included.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["FILES", "write_checkout"]

FILES: dict[str, str] = {
    "utils/__init__.py": '''
first_reasoning_prompt = f"""
REASON header=[HEADER] [CRITIQUE]
prev=[PREV]
hyp=[HYPOTHESIS]
Reasoning:"""


def get_prev_results_str(prev_results, max_previous_results=None):
    return "not read by the importer"
''',
    "baselines.py": '''
def interactive(model, runner, header, train_examples, max_iterations=20):
    input_prompt = f"""
ACT header={header}
prev=[PREV]
hyp=[HYPOTHESIS]
why=[REASONING]
a literal {{brace}} and a [STOP] marker stay text
Suggested Input:"""

    reflection_prompt = f"""
REFLECT header={header}
prev=[PREV]
hyp=[HYPOTHESIS]
why=[REASONING]
last=[LAST_INPUTS]
Hypothesis Conclusion: """
    return None


code_prediction_prompt = """
CODER header=[HEADER]
description=[DESCRIPTION]
examples=[EXAMPLES]
Reasoning: """
''',
    "creation.py": '''
class Prompts:
    validation_creator = """not a prompt the protocol uses"""
    direct = """
INCONTEXT header=[HEADER]
prev=[PREV]
Description: """
''',
    "eval.py": '''
eval_prompt = f"""
JUDGE true=[TRUE]
hyp=[HYPOTHESIS]
Explanation (very short):"""
''',
}


def write_checkout(root: Path, **replace: str) -> Path:
    """Write the fake checkout under ``root`` (``replace`` swaps a file's text, by path with ``/`` as ``__``)."""
    for name, text in FILES.items():
        text = replace.get(name.replace("/", "__").replace(".", "_"), text)
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
