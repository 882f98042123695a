"""What a Ray worker needs from the driver, carried in its arguments rather than read from the driver's disk.

A worker on another node has none of the driver's files: not its data directory (the deployment key), not
its ``--manifests`` directories, price table or capability rows. The driver packs them into a
``Shipment``: the settings that define the run, the deployment key, the provider variables (keys and base
URLs), and the text of every file the run depends on. The worker unpacks it into a private temporary
directory and builds its ``Settings`` from it, keeping only what is the node's own (its data and cache
directories, for the LLM response cache and the compiled sandbox). Secrets never appear in a repr, so
they cannot reach a log.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Settings, SettingsError
from ..manifests import ManifestError, ManifestStore, packaged_manifests

__all__ = ["PROVIDER_PREFIXES", "RUN_SETTINGS", "Shipment", "pack"]

# The settings that decide what a run does, taken from the driver; the rest (where data and caches live) are
# the node's own.
RUN_SETTINGS = (
    "timeout_s", "memory_mb", "max_output_kb", "workers", "budget", "feedback_limit", "judge_model", "coder_model",
    "temperature", "max_tokens", "reasoning_effort", "llm_timeout_s", "llm_concurrency", "llm_retries", "protocol",
    "mcp_era",
)  # fmt: skip

# The LLM providers' variables (keys, base URLs, API versions), forwarded from the driver's environment.
PROVIDER_PREFIXES = ("OPENAI_", "AZURE_OPENAI_", "ANTHROPIC_")


@dataclass(frozen=True)
class Shipment:
    """Everything a worker takes from the driver.

    Attributes:
        values: The driver's run-defining settings (``RUN_SETTINGS``) that are set.
        suites: Files of the suites that do not ship with pau-mcp, by suite name, as ``{file name: text}``.
        pricing: The text of the driver's ``--pricing`` file, if any.
        capabilities: The text of the driver's ``--model-capabilities`` file, if any.
        use_cache: Read and write the node's LLM response cache.
        key: The deployment key (tool names); never shown.
        env: The provider variables; never shown.
    """

    values: dict[str, Any]
    suites: dict[str, dict[str, str]] = field(default_factory=dict)
    pricing: str | None = None
    capabilities: str | None = None
    use_cache: bool = True
    key: str = field(default="", repr=False)
    env: dict[str, str] = field(default_factory=dict, repr=False)

    def settings(self, directory: Path) -> Settings:
        """Unpack into ``directory`` (a worker's own) and return the worker's settings.

        The node's ``PAU_*`` variables still choose its data and cache directories; the driver's values decide
        everything else, and the run store is ``directory/runs.db``.

        Raises:
            SettingsError: a value is refused on this node, or a node variable is malformed.
        """
        values: dict[str, Any] = {}
        node = Settings.from_env()
        for name in ("data_dir", "cache_dir", "workers"):
            if getattr(node, name) is not None:
                values[name] = getattr(node, name)
        values.update(self.values)
        manifests = directory / "suites"
        for name, files in self.suites.items():
            suite = manifests / name
            suite.mkdir(parents=True, exist_ok=True)
            for filename, text in files.items():
                (suite / Path(filename).name).write_text(text, encoding="utf-8")
        if self.suites:
            values["manifests"] = (manifests,)
        for name, text in (("pricing", self.pricing), ("model_capabilities", self.capabilities)):
            if text is not None:
                path = directory / f"{name}.json"
                path.write_text(text, encoding="utf-8")
                values[name] = path
        values["db"] = directory / "runs.db"
        values["tool_key"] = self.key or None
        try:
            return Settings(**values)
        except ValueError as exc:
            raise SettingsError(f"the driver's settings are refused on this worker: {exc}") from None


def pack(settings: Settings, suites: tuple[str, ...] = (), *, key: str = "", use_cache: bool = True) -> Shipment:
    """What the workers of a run need from this driver.

    Args:
        settings: The driver's settings.
        suites: Suites the workers serve; those that ship with pau-mcp are not packed (every node has them).
        key: The deployment key, when the workers need tool names.
        use_cache: Let workers use their node's LLM response cache.

    Raises:
        ManifestError: a suite does not exist or is broken.
    """
    values = {name: getattr(settings, name) for name in RUN_SETTINGS if getattr(settings, name) is not None}
    packaged = _packaged_root()
    files: dict[str, dict[str, str]] = {}
    store = ManifestStore(settings.manifests)
    for name in dict.fromkeys(suites):
        suite = store.suite(name)
        if packaged is not None and suite.path.parent.resolve() == packaged:
            continue
        files[name] = {path.name: path.read_text(encoding="utf-8") for path in sorted(suite.path.glob("*.json"))}
    env = {k: v for k, v in os.environ.items() if k.startswith(PROVIDER_PREFIXES)}
    return Shipment(
        values=values,
        suites=files,
        pricing=settings.pricing.read_text(encoding="utf-8") if settings.pricing else None,
        capabilities=settings.model_capabilities.read_text(encoding="utf-8") if settings.model_capabilities else None,
        use_cache=use_cache,
        key=key,
        env=env,
    )


def _packaged_root() -> Path | None:
    try:
        return packaged_manifests().resolve()
    except ManifestError:
        return None
