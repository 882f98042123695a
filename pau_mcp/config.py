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


class _Words(click.types.StringParamType):
    """Text values; several in one environment variable are separated by ``os.pathsep``, as paths are."""

    envvar_list_splitter = os.pathsep


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
        SettingSpec(
            "data_dir",
            "PAU_MCP_DATA_DIR",
            "--data-dir",
            "Directory for the run store and caches.",
            click.Path(path_type=Path),
        ),
        SettingSpec(
            "cache_dir",
            "PAU_MCP_CACHE_DIR",
            "--cache-dir",
            "Directory for the built sandbox component.",
            click.Path(path_type=Path),
        ),
        SettingSpec("timeout_s", "PAU_MCP_TIMEOUT", "--timeout", "Wall-clock limit per call, in seconds.", float),
        SettingSpec("memory_mb", "PAU_MCP_MEMORY_MB", "--memory-mb", "Memory limit per call, in MiB.", int),
        SettingSpec(
            "manifests",
            "PAU_MCP_MANIFESTS",
            "--manifests",
            "Extra directory of suites (repeatable; in the variable, separated by ':').",
            click.Path(path_type=Path, file_okay=False),
            multiple=True,
        ),
        SettingSpec(
            "workers",
            "PAU_MCP_WORKERS",
            "--workers",
            "Sandbox worker processes for serving or scoring (default: one per CPU; 0: in this process).",
            int,
        ),
        SettingSpec(
            "db",
            "PAU_MCP_DB",
            "--db",
            "The run store (SQLite); default: DATA_DIR/runs.db.",
            click.Path(path_type=Path, dir_okay=False),
        ),
        SettingSpec("budget", "PAU_MCP_BUDGET", "--budget", "Calls allowed per method per session (0: no limit).", int),
        SettingSpec("token", "PAU_MCP_TOKEN", "--token", "Bearer token agents must send over HTTP.", str),
        SettingSpec(
            "log_file",
            "PAU_MCP_LOG_FILE",
            "--log-file",
            "Write server diagnostics here instead of stderr.",
            click.Path(path_type=Path, dir_okay=False),
        ),
        SettingSpec(
            "max_output_kb", "PAU_MCP_MAX_OUTPUT_KB", "--max-output-kb", "Largest returned value per call, in KiB.", int
        ),
        SettingSpec(
            "max_argument_kb",
            "PAU_MCP_MAX_ARGUMENT_KB",
            "--max-argument-kb",
            "Largest arguments of one tool call, in KiB of JSON; larger calls are refused and do not count.",
            int,
        ),
        SettingSpec(
            "max_sessions",
            "PAU_MCP_MAX_SESSIONS",
            "--max-sessions",
            "HTTP sessions open at once; at the limit the longest-idle session is closed to make room.",
            int,
        ),
        SettingSpec(
            "session_idle_s",
            "PAU_MCP_SESSION_IDLE",
            "--session-idle",
            "Seconds an HTTP session may stay idle before it is closed.",
            float,
        ),
        SettingSpec(
            "max_connections",
            "PAU_MCP_MAX_CONNECTIONS",
            "--max-connections",
            "HTTP connections open at once (kept below the open-file limit).",
            int,
        ),
        SettingSpec(
            "read_timeout_s",
            "PAU_MCP_READ_TIMEOUT",
            "--read-timeout",
            "Seconds an HTTP client has to send a whole request once it connects or starts one.",
            float,
        ),
        SettingSpec(
            "allowed_hosts",
            "PAU_MCP_ALLOWED_HOSTS",
            "--allowed-host",
            "Another host name HTTP clients may use, e.g. a reverse proxy's (repeatable; in the variable, separated by ':').",
            _Words(),
            multiple=True,
        ),
        SettingSpec(
            "judge_model",
            "PAU_JUDGE_MODEL",
            "--judge-model",
            "The judge, as provider/model (e.g. openai/gpt-4o-mini, anthropic/claude-haiku-4-5).",
            str,
        ),
        SettingSpec(
            "coder_model",
            "PAU_CODER_MODEL",
            "--coder-model",
            "The model that writes code from a description, as provider/model.",
            str,
        ),
        SettingSpec(
            "pricing",
            "PAU_MCP_PRICING",
            "--pricing",
            "Prices per million tokens (JSON); default: the packaged pricing.json.",
            click.Path(path_type=Path, dir_okay=False, exists=True),
        ),
        SettingSpec(
            "llm_timeout_s", "PAU_LLM_TIMEOUT", "--llm-timeout", "Seconds to wait for one LLM response.", float
        ),
        SettingSpec(
            "llm_concurrency", "PAU_LLM_CONCURRENCY", "--llm-concurrency", "LLM requests in flight at once.", int
        ),
        SettingSpec(
            "llm_retries",
            "PAU_LLM_RETRIES",
            "--llm-retries",
            "Retries of an LLM request after a 429, a 5xx or a lost connection.",
            int,
        ),
        SettingSpec(
            "scorer_token",
            "PAU_SCORER_TOKEN",
            "--scorer-token",
            "Bearer token clients of the scorer endpoint must send.",
            str,
        ),
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
    max_argument_kb: int = Field(64, ge=1, le=16 * 1024)
    max_sessions: int = Field(500, ge=1, le=100_000)
    session_idle_s: float = Field(1800.0, gt=0, le=7 * 24 * 3600)
    max_connections: int = Field(1000, ge=8, le=100_000)
    read_timeout_s: float = Field(10.0, gt=0, le=3600)
    allowed_hosts: tuple[str, ...] = ()
    manifests: tuple[Path, ...] = ()
    db: Path | None = None
    workers: int | None = Field(None, ge=0, le=256)
    budget: int = Field(20, ge=0, le=1_000_000)
    token: str | None = Field(None, min_length=8)
    log_file: Path | None = None
    judge_model: str | None = None
    coder_model: str | None = None
    pricing: Path | None = None
    llm_timeout_s: float = Field(120.0, gt=0, le=3600)
    llm_concurrency: int = Field(8, ge=1, le=1024)
    llm_retries: int = Field(5, ge=0, le=100)
    scorer_token: str | None = Field(None, min_length=8)

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

    def sandbox(self, progress: Any = None, processes: bool = False) -> Any:
        """A sandbox with these limits and this cache directory.

        Args:
            progress: Receives progress lines if the component must be built first.
            processes: Spread calls over worker processes (``workers``, default one per CPU), as a server
                under load should; otherwise calls run in this process.
        """
        from wasm_runtime import Sandbox
        from wasm_runtime.workers import WorkerSandbox

        if processes and self.workers != 0:
            return WorkerSandbox(
                workers=self.workers, limits=self.sandbox_limits(), cache_dir=self.cache_dir, progress=progress
            )
        return Sandbox(limits=self.sandbox_limits(), cache_dir=self.cache_dir, progress=progress)

    def sandbox_limits(self) -> Any:
        """The sandbox limits these settings describe."""
        from wasm_runtime import Limits

        return Limits(
            timeout_s=self.timeout_s,
            memory_bytes=self.memory_mb * 1024 * 1024,
            max_output_bytes=self.max_output_kb * 1024,
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
