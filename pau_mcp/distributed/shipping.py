"""What a Ray worker needs from the driver, carried in its arguments rather than read from the driver's disk.

A worker on another node has none of the driver's files: not its ``--manifests`` directories, price table or
capability rows. The driver packs them into a ``Shipment``: the settings that define the run, the text of
every file the run depends on, and the secrets the worker's role needs and no others. The worker unpacks it
into a private temporary directory and builds its ``Settings`` from it, keeping only what is the node's own
(its data and cache directories, for the LLM response cache and the compiled sandbox).

Ray carries the shipment to every node of the cluster unencrypted and lets anyone who reaches the cluster run
code there (docs/scaling.md), so each secret shipped is one the cluster could lose:

* provider variables (keys, base URLs) only of the providers whose models the worker calls (``models``);
* never the deployment key, which names the deployment's tools and signs its session tokens: an evaluation
  worker's own server gets a key derived from it for the run (``worker_key``), which names tools the
  deployment's server does not have and signs tokens it does not accept.

Secrets never appear in a repr, so they cannot reach a log.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import Settings, SettingsError
from ..manifests import ManifestError, ManifestStore, packaged_manifests

__all__ = [
    "NODE_SETTINGS", "PROVIDER_VARIABLES", "RUN_SETTINGS", "Shipment", "pack", "provider_variables", "worker_key",
]  # fmt: skip

#: The settings that are the node's own (where its data and caches live), files the shipment carries as text, and
#: secrets no worker gets.
NODE_SETTINGS = (
    "data_dir", "cache_dir", "db", "manifests", "pricing", "model_capabilities", "log_file", "tool_key", "token",
    "scorer_token",
)  # fmt: skip
#: The settings that decide what a run does: every other one, taken from the driver's settings object whole (its
#: limits, models, protocol, ...), so a worker's server and scorer run as the driver's would.
RUN_SETTINGS = tuple(name for name in Settings.model_fields if name not in NODE_SETTINGS)

#: The variables each LLM provider reads (keys, base URLs, API versions): a name ending in ``_`` is a prefix.
PROVIDER_VARIABLES: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_",),
    "azure": ("AZURE_OPENAI_", "OPENAI_API_VERSION", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID"),
    "anthropic": ("ANTHROPIC_",),
}


@dataclass(frozen=True)
class Shipment:
    """Everything a worker takes from the driver.

    Attributes:
        values: The driver's run-defining settings (``RUN_SETTINGS``) that are set.
        suites: Files of the suites that do not ship with pau-mcp, by suite name, as ``{file name: text}``.
        pricing: The text of the driver's ``--pricing`` file, if any.
        capabilities: The text of the driver's ``--model-capabilities`` file, if any.
        use_cache: Read and write the node's LLM response cache.
        key: The key the worker's own server names tools with (``worker_key``), or "" for a worker that serves
            none; never shown.
        env: The variables of the providers the worker calls; never shown.
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
        for name, content in (("pricing", self.pricing), ("model_capabilities", self.capabilities)):
            if content is not None:
                path = directory / f"{name}.json"
                path.write_text(content, encoding="utf-8")
                values[name] = path
        values["db"] = directory / "runs.db"
        values["tool_key"] = self.key or None
        try:
            return Settings(**values)
        except ValueError as exc:
            raise SettingsError(f"the driver's settings are refused on this worker: {exc}") from None


def worker_key(deployment_key: str, run: str) -> str:
    """The key an evaluation worker's server names tools with for ``run``: derived from the deployment key, which
    it does not reveal (an HMAC), and different for every run."""
    message = b"pau-mcp ray evaluation worker\0" + run.encode("utf-8", "surrogatepass")
    return hmac.new(deployment_key.encode("utf-8", "surrogatepass"), message, hashlib.sha256).hexdigest()


def provider_variables(models: Iterable[str | None], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables, from ``environ`` (default: this process's), of the providers of ``models`` (``provider/model``).

    A model without a known provider adds nothing: the worker's first request then says what is wrong with it.
    """
    environ = os.environ if environ is None else environ
    names = [name for model in models if model for name in PROVIDER_VARIABLES.get(model.partition("/")[0], ())]
    return {
        key: value
        for key, value in environ.items()
        if any(key.startswith(name) if name.endswith("_") else key == name for name in names)
    }


def pack(
    settings: Settings,
    suites: tuple[str, ...] = (),
    *,
    key: str = "",
    models: Iterable[str | None] = (),
    use_cache: bool = True,
) -> Shipment:
    """What the workers of a run need from this driver.

    Args:
        settings: The driver's settings.
        suites: Suites the workers serve; those that ship with pau-mcp are not packed (every node has them).
        key: The key the workers' own servers name tools with (``worker_key``; never the deployment key), when
            they serve tools.
        models: Every model (``provider/model``) the workers call: only their providers' variables are shipped.
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
    env = provider_variables(models)
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
