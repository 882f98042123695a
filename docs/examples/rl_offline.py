"""The worked example of docs/training.md: a rollout and an SFT export, offline, with a scripted model server.

A tiny OpenAI-compatible server on a loopback port plays both the policy (an
explorer that tries fresh inputs and concludes after four) and the critic
(which rates by a fixed rubric, and judges the evidence settled after four
calls); ``pau-mcp rl rollout`` and ``pau-mcp export sft`` talk to it exactly
as they would talk to vLLM, SGLang or a provider.

Usage: python docs/examples/rl_offline.py [WORK_DIR]
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def policy(prompt: str) -> str:
    tried = len(re.findall(r"^  test_func", prompt.split("Your latest experiments:")[1].split("Your current")[0], re.M))
    if "Give the exact input now" in prompt:
        return f"INPUT: ({tried + 1},)"
    if "CONCLUDED: YES" in prompt:
        return (
            f"CONCLUDED: {'YES' if tried >= 4 else 'NO'}\nHYPOTHESIS: counts the steps to reach 1; ValueError below 1"
        )
    return f"I will try {tried + 1}: a value I have not seen yet."


def critic(prompt: str) -> str:
    if "hypothesis to rate" in prompt:
        return "It names the step count and the error.\nRating: 8"
    if "judge the evidence alone" in prompt:  # what the calls so far settle: four of them settle it
        calls = len(re.findall(r"^test_func", prompt.split("experiments so far")[1], re.M))
        return f"{calls} calls.\nRating: {8 if calls >= 4 else 3}"
    return "A fresh input.\nRating: 6"


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the http.server naming
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        system, prompt = body["messages"][0]["content"], body["messages"][-1]["content"]
        text = critic(prompt) if "critic of an explorer" in system else policy(prompt)
        reply = {
            "id": "x", "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(prompt.split()), "completion_tokens": len(text.split())},
        }  # fmt: skip
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    work = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="pau-rl-"))
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {**os.environ, "OPENAI_BASE_URL": f"http://127.0.0.1:{server.server_port}/v1", "OPENAI_API_KEY": "offline"}
    pau = [sys.executable, "-m", "pau_mcp"]
    common = ["--data-dir", str(work)]
    subprocess.run(
        [*pau, "rl", "rollout", "--model", "openai/my-policy", "--critic-model", "openai/my-critic", "--run", "demo",
         "--methods", "builtin/b005", "--methods", "builtin/b012", "--out", str(work / "trajectories"), *common],
        env=env, check=True,
    )  # fmt: skip
    subprocess.run(
        [*pau, "export", "sft", "demo", "--kind", "distill", "--out", str(work / "sft"), *common], env=env, check=True
    )
    first = json.loads((work / "trajectories" / "trajectories.jsonl").read_text().splitlines()[0])
    print(f"episode {first['method_id']}: return {first['return']:.3f} over {len(first['steps'])} steps")
    for step in first["steps"][:3]:
        print(f"  {step['phase']:8} reward {step['reward']:+.3f}  {step['action'].splitlines()[0]}")
    server.shutdown()


if __name__ == "__main__":
    main()
