"""A small suite with tasks for the task tests: five built-in methods copied as suite ``mini`` and three tasks of
one, two and three hops over them (their answers left for ``manifests freeze``)."""

from __future__ import annotations

from pathlib import Path

from pau_mcp.manifests import ManifestStore, Suite, SuiteInfo, Task, TaskStep

#: The built-in methods copied: digits' product (int), steps to 1 (int), base 3 (str), vowels (int), shift (str).
COPIED = ("b001", "b005", "b023", "b004", "b007")

TASKS = [
    Task(
        id="mini/t1", question="What is the product of the non-zero digits of 2045?",
        steps=[TaskStep(method="mini/b001", input="(2045,)")],
    ),
    Task(
        id="mini/t2", asks_calls=True,
        question="Multiply together the non-zero digits of 234, then write that number in base 3: what string is it?",
        steps=[TaskStep(method="mini/b001", input="(234,)"), TaskStep(method="mini/b023", input="($1,)")],
    ),
    Task(
        id="mini/t3", asks_calls=True,
        question="Take the product of the non-zero digits of 57, count the steps needed to bring that number to 1 "
        "(divide by 3 when you can, else halve it when even, else add 1), and write the count in base 3.",
        steps=[
            TaskStep(method="mini/b001", input="(57,)"), TaskStep(method="mini/b005", input="($1,)"),
            TaskStep(method="mini/b023", input="($2,)"),
        ],
    ),
]  # fmt: skip

#: What the gold functions answer: 2*4*5; 24 in base 3; 57 -> 35 -> 5 steps -> '12'.
ANSWERS = {"mini/t1": 40, "mini/t2": "220", "mini/t3": "12"}


def make_task_suite(root: Path, tasks: list[Task] | None = None) -> Path:
    """Write suite ``mini`` under ``root`` (frozen methods, unfrozen tasks); returns ``root``."""
    builtin = ManifestStore().suite("builtin")
    suite = Suite.create(root, SuiteInfo(name="mini"))
    for name in COPIED:
        suite.save(builtin.methods[f"builtin/{name}"].model_copy(update={"id": f"mini/{name}"}))
    for task in TASKS if tasks is None else tasks:
        suite.save_task(task)
    return root
