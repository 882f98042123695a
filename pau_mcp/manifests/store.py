"""Suites on disk: ``<dir>/<suite>/suite.json``, one ``<name>.json`` per method, and optionally one
``tasks/<name>.json`` per task (a question over the suite's methods, ``model.Task``).

One file per method keeps reviews and diffs small; the source is stored as a
list of lines. Suites are found in the suites that ship with pau-mcp (the
repository's ``manifests/``, installed as the package ``pau_mcp._suites`` and
found through ``importlib.resources``, so a wheel finds them as an editable
install does) and in every directory given by ``--manifests`` /
``PAU_MCP_MANIFESTS``. A suite name found twice is an error rather than a
silent choice, and so is a ``--manifests`` directory that does not exist.
"""

from __future__ import annotations

import gc
import importlib.resources
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from .model import Method, SuiteInfo, Task

__all__ = [
    "ManifestError",
    "ManifestStore",
    "Suite",
    "dump_info",
    "dump_method",
    "dump_task",
    "load_method",
    "packaged_manifests",
]

#: The folder of a suite that holds its tasks.
TASKS_DIR = "tasks"

# The package the top-level manifests/ directory is installed as (pyproject.toml maps it).
_PACKAGED = "pau_mcp._suites"
_WHERE = "--manifests / PAU_MCP_MANIFESTS"


class ManifestError(ValueError):
    """A manifest file is missing, malformed or inconsistent; the message names the file and the field."""


def packaged_manifests() -> Path:
    """The directory of the suites that ship with pau-mcp, wherever pau-mcp is installed.

    Raises:
        ManifestError: This installation does not have them (an editable install made before the
            suites were packaged); the message says how to reinstall.
    """
    try:
        root = importlib.resources.files(_PACKAGED)
    except ModuleNotFoundError:
        raise ManifestError(
            f"this pau-mcp installation lacks its packaged suites (no package {_PACKAGED}); reinstall it: "
            "`pip install -e .` in a checkout, `pip install --force-reinstall pau-mcp` otherwise"
        ) from None
    if not isinstance(root, Path) or not root.is_dir():
        raise ManifestError(f"the packaged suites are not a directory on disk ({root}); install pau-mcp with pip")
    return root


def _explain(path: Path, error: ValidationError) -> ManifestError:
    problems = []
    for item in error.errors()[:5]:
        where = ".".join(str(part) for part in item["loc"]) or "(file)"
        problems.append(f"  {where}: {item['msg']}")
    more = f"\n  ... and {error.error_count() - 5} more" if error.error_count() > 5 else ""
    return ManifestError(f"{path}: invalid manifest\n" + "\n".join(problems) + more)


_ONE_PER_LINE = {"source", "examples", "tests"}


def _compact(value: object, indent: int = 0, width: int = 110, expand: bool = False) -> str:
    """JSON where what fits on one line stays on one line; each source line and each case gets exactly one line."""
    flat = json.dumps(value, ensure_ascii=False)
    if (len(flat) + indent <= width and not expand) or not isinstance(value, (dict, list)) or not value:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, list):
        # In a list that must be one item per line (source lines, cases), every item stays whole on its line.
        items = [
            pad + (json.dumps(item, ensure_ascii=False) if expand else _compact(item, indent + 2, width))
            for item in value
        ]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    items = [f"{pad}{json.dumps(k)}: {_compact(v, indent + 2, width, k in _ONE_PER_LINE)}" for k, v in value.items()]
    return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"


def dump_method(method: Method) -> str:
    """The file text of a method: JSON that reviews well (source as lines, one case per line)."""
    return _compact(method.model_dump(mode="json", exclude_none=True)) + "\n"


def dump_info(info: SuiteInfo) -> str:
    """The text of a ``suite.json``: the fields set, without the empty ones creation adds."""
    data = info.model_dump(mode="json", exclude_none=True)
    if not data.get("models"):
        data.pop("models", None)
    if not data.get("public_source"):
        data.pop("public_source", None)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def dump_task(task: Task) -> str:
    """The file text of a task."""
    return _compact(task.model_dump(mode="json", exclude_none=True)) + "\n"


@dataclass
class Suite:
    """A loaded suite: its info and its methods by id, in file-name order."""

    info: SuiteInfo
    path: Path
    methods: dict[str, Method] = field(default_factory=dict)
    tasks: dict[str, Task] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The suite's name."""
        return self.info.name

    def method_path(self, method_id: str) -> Path:
        """The file a method lives in."""
        return self.path / f"{method_id.split('/', 1)[1]}.json"

    def save(self, method: Method) -> Path:
        """Write one method (atomically) and keep it in this suite."""
        if method.suite != self.name:
            raise ManifestError(f"method {method.id} does not belong to suite {self.name}")
        target = self.method_path(method.id)
        _write(target, dump_method(method))
        self.methods[method.id] = method
        return target

    def task_path(self, task_id: str) -> Path:
        """The file a task lives in."""
        return self.path / TASKS_DIR / f"{task_id.split('/', 1)[1]}.json"

    def save_task(self, task: Task) -> Path:
        """Write one task (atomically) and keep it in this suite.

        Raises:
            ManifestError: the task belongs to another suite or calls a method this suite lacks.
        """
        if task.suite != self.name:
            raise ManifestError(f"task {task.id} does not belong to suite {self.name}")
        _check_task_methods(self, task, self.task_path(task.id))
        target = self.task_path(task.id)
        target.parent.mkdir(exist_ok=True)
        _write(target, dump_task(task))
        self.tasks[task.id] = task
        return target

    @classmethod
    def create(cls, root: Path, info: SuiteInfo, replace: bool = False) -> Suite:
        """Make an empty suite directory under ``root`` (refusing to overwrite unless ``replace``)."""
        path = root / info.name
        if path.exists() and any(path.iterdir()):
            if not replace:
                raise ManifestError(f"{path} already exists; choose another --suite name or pass --replace")
            for old in path.glob("*.json"):
                old.unlink()
        path.mkdir(parents=True, exist_ok=True)
        (path / "suite.json").write_text(dump_info(info))
        return cls(info=info, path=path)

    @classmethod
    def load(cls, path: Path) -> Suite:
        """Load and validate a suite directory.

        Raises:
            ManifestError: naming the file and the field at fault.
        """
        info_path = path / "suite.json"
        try:
            info = SuiteInfo.model_validate_json(info_path.read_bytes())
        except FileNotFoundError:
            raise ManifestError(f"{info_path}: missing; every suite directory needs a suite.json") from None
        except ValidationError as exc:
            raise _explain(info_path, exc) from None
        if info.name != path.name:
            raise ManifestError(f"{info_path}: name is {info.name!r} but the directory is {path.name!r}")
        suite = cls(info=info, path=path)
        # A large suite is over a million long-lived objects and holds no reference cycles; left on, the
        # cyclic collector rescans the growing heap over and over (70% of the time for 5,000 methods).
        collecting = gc.isenabled()
        gc.disable()
        try:
            for file in sorted(path.glob("*.json")):
                if file.name == "suite.json":
                    continue
                try:
                    method = Method.model_validate_json(file.read_bytes())
                except ValidationError as exc:
                    raise _explain(file, exc) from None
                if method.id != f"{info.name}/{file.stem}":
                    raise ManifestError(f"{file}: id is {method.id!r} but the file says {info.name}/{file.stem}")
                suite.methods[method.id] = method
        finally:
            if collecting:
                gc.enable()
        for file in sorted((path / TASKS_DIR).glob("*.json")):
            try:
                task = Task.model_validate_json(file.read_bytes())
            except ValidationError as exc:
                raise _explain(file, exc) from None
            if task.id != f"{info.name}/{file.stem}":
                raise ManifestError(f"{file}: id is {task.id!r} but the file says {info.name}/{file.stem}")
            _check_task_methods(suite, task, file)
            suite.tasks[task.id] = task
        return suite


def _write(target: Path, text: str) -> None:
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)


def _check_task_methods(suite: Suite, task: Task, file: Path) -> None:
    for number, step in enumerate(task.steps, start=1):
        if step.method not in suite.methods:
            raise ManifestError(
                f"{file}: steps.{number - 1}.method: suite {suite.name!r} has no method {step.method!r}"
            )


def load_method(path: Path) -> Method:
    """Load and validate one manifest file, wherever it is.

    Raises:
        ManifestError: the file cannot be read or is not a valid method; the message names it.
    """
    try:
        return Method.model_validate_json(path.read_bytes())
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except ValidationError as exc:
        raise _explain(path, exc) from None


class ManifestStore:
    """Finds and loads suites from the packaged suites and extra directories.

    Args:
        extra_dirs: More directories holding suites (``--manifests``); each must exist when suites are
            looked up, except the first, which ``writable_root`` creates for an importer.
        include_packaged: Also look in the suites that ship with pau-mcp.
    """

    def __init__(self, extra_dirs: Iterable[Path] = (), include_packaged: bool = True) -> None:
        self.extra_dirs = [Path(d).expanduser() for d in extra_dirs]
        self.dirs = list(self.extra_dirs)
        # Kept for the first lookup rather than raised here: commands report a ManifestError where they look.
        self._missing_package: ManifestError | None = None
        if include_packaged:
            try:
                self.dirs.append(packaged_manifests())
            except ManifestError as exc:
                self._missing_package = exc
        self._loaded: dict[str, Suite] = {}

    def _check_dirs(self) -> None:
        if self._missing_package is not None:
            raise self._missing_package
        for root in self.extra_dirs:
            if not root.exists():
                raise ManifestError(f"{_WHERE}: {root} does not exist; create it or correct the path")
            if not root.is_dir():
                raise ManifestError(f"{_WHERE}: {root} is a file; give a directory of suites")

    def _locations(self) -> dict[str, Path]:
        self._check_dirs()
        found: dict[str, Path] = {}
        for root in self.dirs:
            for entry in sorted(root.iterdir()):
                if (entry / "suite.json").is_file():
                    if entry.name in found and found[entry.name].resolve() != entry.resolve():
                        raise ManifestError(
                            f"suite {entry.name!r} exists twice: {found[entry.name]} and {entry}; rename one"
                        )
                    found[entry.name] = entry
        return found

    def names(self) -> list[str]:
        """Names of every suite found."""
        return sorted(self._locations())

    def suite(self, name: str) -> Suite:
        """Load a suite by name (cached).

        Raises:
            ManifestError: unknown suite (the message lists the known ones) or a bad file.
        """
        if name not in self._loaded:
            locations = self._locations()
            if name not in locations:
                known = ", ".join(sorted(locations)) or "none"
                raise ManifestError(f"no suite named {name!r} (known: {known}); add its directory with --manifests")
            self._loaded[name] = Suite.load(locations[name])
        return self._loaded[name]

    def methods(self, suites: Iterable[str]) -> Iterator[Method]:
        """Every method of the named suites, suite by suite."""
        for name in suites:
            yield from self.suite(name).methods.values()

    def method(self, method_id: str) -> Method:
        """One method by id (``suite/name``).

        Raises:
            ManifestError: the suite or the method does not exist.
        """
        suite_name = method_id.split("/", 1)[0]
        suite = self.suite(suite_name)
        try:
            return suite.methods[method_id]
        except KeyError:
            raise ManifestError(f"suite {suite_name!r} has no method {method_id!r}") from None

    def writable_root(self) -> Path:
        """Where new suites go: the first ``--manifests`` directory, created if missing.

        The packaged suites are part of the installation (in a wheel, inside site-packages), so new
        suites never go there.

        Raises:
            ManifestError: No ``--manifests`` directory was given, or one of them is not a directory.
        """
        if not self.extra_dirs:
            raise ManifestError(
                "new suites need a directory of your own: pass --manifests DIR or set PAU_MCP_MANIFESTS "
                "(the packaged suites belong to the installation)"
            )
        root = self.extra_dirs[0]
        if not root.exists():
            root.mkdir(parents=True)
        self._check_dirs()
        return root
