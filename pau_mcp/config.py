"""One settings object for every command: CLI flags and ``PAU_*`` variables.

Each setting is declared once in ``SETTINGS`` with its environment variable
and its flag; commands pick the settings they take with ``options(...)`` and
get a validated ``Settings`` back from ``Settings.from_options``. A flag beats
the variable, the variable beats the default.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = ["SETTINGS", "SettingSpec", "Settings", "SettingsError", "default_data_dir", "options"]


class SettingsError(ValueError):
    """A setting has a bad value; the message names its flag and environment variable."""


def default_data_dir() -> Path:
    """Where runs and caches live unless ``PAU_MCP_DATA_DIR`` moves them (``~/.local/share/pau-mcp`` on Linux)."""
    return Path(platformdirs.user_data_dir("pau-mcp"))


@dataclass(frozen=True)
class SettingSpec:
    """How one setting is spelled on the command line and in the environment."""

    name: str
    env: str
    flag: str
    help: str
    type: Any = str
    multiple: bool = False


SETTINGS: dict[str, SettingSpec] = {
    spec.name: spec
    for spec in [
        SettingSpec("data_dir", "PAU_MCP_DATA_DIR", "--data-dir", "Directory for the run store and caches.", click.Path(path_type=Path)),
        SettingSpec("cache_dir", "PAU_MCP_CACHE_DIR", "--cache-dir", "Directory for the built sandbox component.", click.Path(path_type=Path)),
        SettingSpec("timeout_s", "PAU_MCP_TIMEOUT", "--timeout", "Wall-clock limit per call, in seconds.", float),
        SettingSpec("memory_mb", "PAU_MCP_MEMORY_MB", "--memory-mb", "Memory limit per call, in MiB.", int),
        SettingSpec(
            "manifests", "PAU_MCP_MANIFESTS", "--manifests",
            "Extra directory of suites (repeatable; in the variable, separated by ':').",
            click.Path(path_type=Path, file_okay=False), multiple=True,
        ),
        SettingSpec("db", "PAU_MCP_DB", "--db", "The run store (SQLite); default: DATA_DIR/runs.db.", click.Path(path_type=Path, dir_okay=False)),
        SettingSpec("budget", "PAU_MCP_BUDGET", "--budget", "Calls allowed per method per session (0: no limit).", int),
        SettingSpec("token", "PAU_MCP_TOKEN", "--token", "Bearer token agents must send over HTTP.", str),
        SettingSpec("log_file", "PAU_MCP_LOG_FILE", "--log-file", "Write server diagnostics here instead of stderr.", click.Path(path_type=Path, dir_okay=False)),
        SettingSpec("max_output_kb", "PAU_MCP_MAX_OUTPUT_KB", "--max-output-kb", "Largest returned value per call, in KiB.", int),
    ]
}


class Settings(BaseModel):
    """Validated settings; unset values take the defaults below."""

    model_config = ConfigDict(frozen=True)

    data_dir: Path = Field(default_factory=default_data_dir)
    cache_dir: Path | None = None
    timeout_s: float = Field(2.0, gt=0, le=3600)
    memory_mb: int = Field(256, ge=96, le=4096)
    max_output_kb: int = Field(64, ge=1, le=16 * 1024)
    manifests: tuple[Path, ...] = ()
    db: Path | None = None
    budget: int = Field(20, ge=0, le=1_000_000)
    token: str | None = Field(None, min_length=8)
    log_file: Path | None = None

    @field_validator("data_dir", "cache_dir", "db", "log_file", mode="after")
    @classmethod
    def _expand(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @classmethod
    def from_options(cls, **values: Any) -> Settings:
        """Build settings from command options, dropping the ones not given.

        Raises:
            SettingsError: A value is out of range; the message names the flag and variable.
        """
        return cls._validated({k: v for k, v in values.items() if k in SETTINGS and v not in (None, ())})

    @classmethod
    def _validated(cls, values: dict[str, Any]) -> Settings:
        try:
            return cls(**values)
        except ValidationError as exc:
            problems = []
            for error in exc.errors():
                name = str(error["loc"][0]) if error["loc"] else ""
                spec = SETTINGS.get(name)
                where = f"{spec.flag} / {spec.env}" if spec else name
                problems.append(f"{where}: {error['msg']} (got {error.get('input')!r})")
            raise SettingsError("; ".join(problems)) from None

    @classmethod
    def from_env(cls) -> Settings:
        """Build settings from ``PAU_*`` variables alone (for code not started by the CLI)."""
        values: dict[str, Any] = {}
        for spec in SETTINGS.values():
            raw = os.environ.get(spec.env)
            if raw is not None and raw != "":
                values[spec.name] = raw.split(os.pathsep) if spec.multiple else raw
        return cls._validated(values)

    @property
    def db_path(self) -> Path:
        """The run store file."""
        return self.db if self.db is not None else self.data_dir / "runs.db"

    def run_store(self) -> Any:
        """The run store at ``db_path``."""
        from .runstore import RunStore

        return RunStore(self.db_path)

    def manifest_store(self) -> Any:
        """The manifest store over the packaged suites and ``manifests`` directories."""
        from .manifests import ManifestStore

        return ManifestStore(self.manifests)

    def sandbox(self, progress: Any = None) -> Any:
        """A sandbox with these limits and this cache directory."""
        from wasm_runtime import Sandbox

        return Sandbox(limits=self.sandbox_limits(), cache_dir=self.cache_dir, progress=progress)

    def sandbox_limits(self) -> Any:
        """The sandbox limits these settings describe."""
        from wasm_runtime import Limits

        return Limits(
            timeout_s=self.timeout_s, memory_bytes=self.memory_mb * 1024 * 1024, max_output_bytes=self.max_output_kb * 1024
        )


def options(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add the click options of the named settings to a command, each bound to its environment variable."""

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        for name in reversed(names):
            spec = SETTINGS[name]
            command = click.option(
                spec.flag,
                spec.name,
                envvar=spec.env,
                show_envvar=True,
                type=spec.type,
                multiple=spec.multiple,
                default=None if not spec.multiple else (),
                help=spec.help,
            )(command)
        return command

    return decorate
