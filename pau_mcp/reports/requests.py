"""A report request carried out (``pau-mcp report``, and the report a sweep ends with): the runs loaded, the suites
profiled, failed episodes classified when asked, every number computed; what went wrong comes back as data.

The manifests give the report what the run store does not hold: the profiles of the suites, and which method each
variant was made from (``provenance.variant_origins``, which the leaderboard shares).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ..manifests import ManifestError, ManifestStore
from ..manifests.importers.common import Progress, no_progress
from .analyses import SuiteProfile, suite_profile
from .build import build_report
from .data import ReportError, RunData, load_runs
from .epochs import DEFAULT_THRESHOLD
from .provenance import variant_origins
from .report import Report

if TYPE_CHECKING:
    from ..config import Settings
    from ..runstore import RunStore

__all__ = ["Classified", "ReportMade", "ReportRequest", "make_report", "suite_profiles"]


@dataclass(frozen=True)
class ReportRequest:
    """What to report on, and how.

    Attributes:
        names: The runs (an ``eval --epochs`` run's name stands for its epochs); none: only the suites.
        suites: Suites to describe besides the runs' own.
        unscored_as_one: Count unscored judge replies as 1 (the reference's rule).
        resamples: Bootstrap resamples per paired test.
        seed: Bootstrap seed.
        pass_threshold: Code match at or above which an episode passes (pass@k, pass^k).
        classify_failures: Label each failed episode with the settings' judge model.
        use_cache: With ``classify_failures``: read and write the LLM response cache.
    """

    names: tuple[str, ...] = ()
    suites: tuple[str, ...] = ()
    unscored_as_one: bool = False
    resamples: int = 10_000
    seed: int = 0
    pass_threshold: float = DEFAULT_THRESHOLD
    classify_failures: bool = False
    use_cache: bool = True


@dataclass(frozen=True)
class Classified:
    """What classifying failed episodes came to.

    Attributes:
        model: The classifier (the judge model).
        cases: Failed episodes found.
        labelled: Of those, the episodes given a label.
        cost_usd: What the classifier cost.
        unpriced: Models used that have no price (their cost is not counted).
    """

    model: str
    cases: int
    labelled: int
    cost_usd: float
    unpriced: list[str] = field(default_factory=list)


@dataclass
class ReportMade:
    """What a report request came to.

    Attributes:
        status: ``made``; ``usage`` (the request is wrong: the message says what to change); ``error``.
        message: Why no report was made, unless made.
        report: The report, when made.
        classified: What classifying failed episodes came to, when asked.
    """

    status: Literal["made", "usage", "error"]
    message: str = ""
    report: Report | None = None
    classified: Classified | None = None


_NO_CLASSIFIER = "--classify-failures needs a model: pass --judge-model provider/model or set PAU_JUDGE_MODEL"


def suite_profiles(manifests: ManifestStore, runs: Sequence[RunData], asked: Sequence[str]) -> list[SuiteProfile]:
    """The profiles of the suites asked for and of the runs' suites that are installed (in that order).

    Raises:
        ManifestError: a suite asked for is not installed, or its files are broken.
    """
    known = set(manifests.names())
    covered = [name.strip() for run in runs for name in run.suite.split(",") if name.strip() in known]
    return [suite_profile(name, manifests.suite(name).methods.values()) for name in dict.fromkeys([*asked, *covered])]


def _classify(
    settings: Settings, store: RunStore, runs: Sequence[RunData], request: ReportRequest, progress: Progress,
    step: Callable[[str], None] | None,
) -> tuple[dict[str, dict[str, str]], Classified]:  # fmt: skip
    """Each failed episode's label by the judge model, and what that came to.

    Raises:
        LLMError: the model cannot be used.
    """
    from ..llm import LLMClient
    from ..scoring import Scorer
    from .failures import UNCLASSIFIED, classify_cases, failure_cases

    model = settings.judge_model or ""
    llm = LLMClient.from_settings(settings, use_cache=request.use_cache)
    llm.check(model)
    cases = [case for run in runs for case in failure_cases(store, run, request.unscored_as_one)]
    # The scorer, the only reader of gold data, gives each case its gold description and failing tests.
    scorer = Scorer.from_settings(settings, use_cache=request.use_cache, progress=step) if cases else None
    with progress("classifying failures", len(cases)) as advance:
        labels = classify_cases(llm, model, cases, progress=advance, evidence=scorer.evidence if scorer else None)
    given = [label for by_method in labels.values() for label in by_method.values()]
    labelled = len(given) - given.count(UNCLASSIFIED)
    return labels, Classified(model, len(cases), labelled, llm.spend.cost_usd, sorted(llm.spend.unpriced))


def make_report(
    request: ReportRequest,
    settings: Settings,
    store: RunStore | None,
    *,
    progress: Progress = no_progress,
    step: Callable[[str], None] | None = None,
) -> ReportMade:
    """Report on runs and suites: per-run scores, Max over runs, modes and paired bootstrap tests, and the paper's
    analyses.

    Args:
        request: What to report on, and how.
        settings: Manifests, and the judge model and its limits (to classify failures).
        store: The run store the runs come from (None: no runs, only suites).
        progress: A progress bar factory (classifying failures).
        step: Told each step of making the classifier's sandbox.
    """
    from ..llm import LLMError

    manifests = ManifestStore(settings.manifests)
    made = ReportMade("made")
    try:
        runs = load_runs(store, request.names) if store is not None else []
        profiles = suite_profiles(manifests, runs, request.suites)
        labels = None
        if request.classify_failures and store is not None:
            if not settings.judge_model:
                return ReportMade("usage", _NO_CLASSIFIER)
            labels, made.classified = _classify(settings, store, runs, request, progress, step)
        made.report = build_report(
            runs, unscored_as_one=request.unscored_as_one, resamples=request.resamples, seed=request.seed,
            failure_labels=labels, suites=profiles, variant_origins=variant_origins(manifests, runs),
            pass_threshold=request.pass_threshold,
        )  # fmt: skip
    except ManifestError as exc:
        return ReportMade("error", f"{exc}; `pau-mcp manifests list` shows the suites")
    except (ReportError, LLMError) as exc:
        return ReportMade("error", str(exc))
    return made
