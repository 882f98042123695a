"""The creation tests' fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from creating import Serve
from fakellm import FakeLLM
from scripted import ScriptedModel


@pytest.fixture
def serve() -> Iterator[Serve]:
    """``serve(model)`` starts a fake OpenAI-compatible server answering with the scripted model."""
    servers: list[FakeLLM] = []

    def start(model: ScriptedModel) -> FakeLLM:
        fake = FakeLLM(model).start()
        servers.append(fake)
        return fake

    yield start
    for fake in servers:
        fake.stop()
