"""MLflow tracking for ``eval``, ``train`` and ``compare`` (the ``mlflow`` extra; imported only when used).

One MLflow run per method: ``compare`` opens a parent run and one nested child run per method. Each run gets the
effective settings as params (secrets masked, as ``memento config show`` prints them), per-example scores (one step
per example) and the mean, its 95% CI and the costs as metrics, and the result files, plots, trajectories and the
HTML report as artifacts. DSPy calls are traced through MLflow's DSPy autologging while a run is open.

MLflow's own telemetry is switched off unless the environment says otherwise (``MLFLOW_DISABLE_TELEMETRY``).
A ``file:`` URI or a plain directory is MLflow's file store (in maintenance mode upstream; allowed here);
``sqlite:///path.db`` keeps artifacts in ``path.db``'s directory under ``mlartifacts/``.

Example:
    >>> from memento.records.tracking import MLflowTracker
    >>> tracker = MLflowTracker("sqlite:///runs/mlflow.db")  # doctest: +SKIP
    >>> with tracker.run("eval closed_book", settings=settings):  # doctest: +SKIP
    ...     tracker.log_eval(result, out_dir)
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from memento.core.config import _flatten  # the dotted flattening the settings already use
from memento.core.errors import ConfigError

__all__ = ["MLflowTracker", "CompareTracking"]

logger = logging.getLogger(__name__)

_MAX_PARAMS = 100  # MLflow's batch limit per call


def _mlflow() -> Any:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    try:
        import mlflow
    except ImportError:
        raise ConfigError("--mlflow needs MLflow: pip install 'memento-dspy[mlflow]'") from None
    return mlflow


def _finite(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


class MLflowTracker:
    """Runs, params, metrics and artifacts in one MLflow tracking store.

    Args:
        uri: the tracking URI (``sqlite:///x.db``, ``file:/dir`` or a directory, ``http://host:5000``).
        experiment: the experiment name (created when missing).
        autolog: trace DSPy calls with ``mlflow.dspy.autolog`` while runs are open.
    """

    def __init__(self, uri: str, *, experiment: str = "memento", autolog: bool = True) -> None:
        self.mlflow = _mlflow()
        self.uri = self._resolve(uri)
        self.experiment = experiment
        self.mlflow.set_tracking_uri(self.uri)
        try:
            self.experiment_id = self._experiment_id()
        except Exception as exc:  # an unreachable server or an unusable store: one clear line
            raise ConfigError(f"--mlflow {uri}: cannot use the tracking store: {type(exc).__name__}: {exc}") from None
        self.autolog = autolog
        self._autologging = False

    @staticmethod
    def _resolve(uri: str) -> str:
        scheme = urlsplit(uri).scheme
        if scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt"):
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
            path = Path(uri[len("file:") :] if uri.startswith("file:") else uri).expanduser()
            while str(path).startswith("//"):
                path = Path(str(path)[1:])
            path.mkdir(parents=True, exist_ok=True)
            return path.resolve().as_uri()
        if scheme == "sqlite":
            db = uri.split("sqlite:///", 1)[-1]
            if db and db != ":memory:":
                Path(db).expanduser().parent.mkdir(parents=True, exist_ok=True)
        return uri

    def _experiment_id(self) -> str:
        client = self.mlflow.tracking.MlflowClient(tracking_uri=self.uri)
        found = client.get_experiment_by_name(self.experiment)
        if found is not None:
            return str(found.experiment_id)
        location = None
        if self.uri.startswith("sqlite:///"):  # artifacts beside the database, not in the working directory
            db = Path(self.uri.split("sqlite:///", 1)[1]).expanduser().resolve()
            location = (db.parent / "mlartifacts").as_uri()
        return str(client.create_experiment(self.experiment, artifact_location=location))

    # -- runs ----------------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def run(self, name: str, *, settings: Any = None, nested: bool = False, tags: dict[str, str] | None = None
            ) -> Iterator[Any]:  # fmt: skip
        """Open a run (nested under the active one when ``nested``); its params are the effective settings."""
        self._start_autolog()
        with self.mlflow.start_run(
            run_name=name, experiment_id=self.experiment_id, nested=nested, tags=tags or {}
        ) as active:
            if settings is not None:
                self.log_settings(settings)
            yield active

    def _start_autolog(self) -> None:
        if not self.autolog or self._autologging:
            return
        try:
            import mlflow.dspy

            from memento.utils.scrub import scrub_span

            # every span is scrubbed before it is exported: no key a provider echoed reaches a trace
            self.mlflow.tracing.configure(span_processors=[scrub_span])
            mlflow.dspy.autolog(silent=True)
            self._autologging = True
        except Exception as exc:  # tracing is a bonus: the run's numbers are logged without it
            logger.warning("MLflow DSPy autologging unavailable: %s", exc)

    def close(self) -> None:
        """Stop DSPy autologging (runs end with their ``with`` blocks)."""
        if self._autologging:
            with contextlib.suppress(Exception):
                import mlflow.dspy

                mlflow.dspy.autolog(disable=True, silent=True)
            self._autologging = False

    def log_settings(self, settings: Any, *, prefix: str = "") -> None:
        """The effective settings as params (secrets masked), with where each value came from as tags."""
        from memento.utils.scrub import scrub

        params = {  # effective() masks secrets; scrubbed again: MLflow's store is a file like any other
            f"{prefix}{key}": "" if value is None else scrub(str(value))[:6000]
            for key, value, _ in settings.effective()
        }
        items = list(params.items())
        for start in range(0, len(items), _MAX_PARAMS):
            self.mlflow.log_params(dict(items[start : start + _MAX_PARAMS]))

    def log_metrics(self, metrics: dict[str, Any], *, step: int | None = None) -> None:
        """Finite numbers only (a missing CI is not logged)."""
        clean = {k: v for k, v in ((k, _finite(v)) for k, v in metrics.items()) if v is not None}
        if clean:
            self.mlflow.log_metrics(clean, step=step)

    def log_scores(self, scores: list[float], *, key: str = "score") -> None:
        """Per-example scores, one step per example (MLflow's chart shows them in order)."""
        for step, score in enumerate(scores):
            self.log_metrics({key: score}, step=step)

    def log_artifacts(self, paths: list[Path], *, under: str | None = None) -> None:
        """Files and directories that exist (directories recursively)."""
        for path in paths:
            if path.is_dir():
                self.mlflow.log_artifacts(str(path), artifact_path=f"{under}/{path.name}" if under else path.name)
            elif path.is_file():
                self.mlflow.log_artifact(str(path), artifact_path=under)

    # -- what the commands log -----------------------------------------------------------------------------------
    def log_eval(self, result: Any, out_dir: Path) -> None:
        """An :class:`memento.metrics.evaluation.EvalResult`: scores, mean, CI, usage; results and trajectories."""
        self.log_scores([float(r.score) for r in result.examples])
        u, j = result.usage, result.judge_usage
        self.log_metrics(
            {
                "mean": result.mean,
                "ci_low": result.ci_low,
                "ci_high": result.ci_high,
                "n": result.n,
                "errors": result.errors,
                "lm_calls": u.lm_calls,
                "prompt_tokens": u.prompt_tokens,
                "completion_tokens": u.completion_tokens,
                "judge_calls": j.lm_calls,
                "searches": u.searches,
                "fetches": u.fetches,
                "seconds": result.seconds,
                **{f"measure_{k}": v for k, v in result.measures.items()},
            }
        )
        self.log_artifacts([out_dir / "results.json", out_dir / "trajectories.jsonl", _html(out_dir)])

    def log_training(self, reports: list[Any], memory_dir: Any) -> None:
        """A :class:`memento.optimize.memento_trainer.MementoTrainer`'s batch reports (one step per batch)."""
        for report in reports:
            data = report.model_dump(mode="json") if hasattr(report, "model_dump") else dict(vars(report))
            numbers = {
                k: v for k, v in _flatten(data).items() if isinstance(v, int | float) and not isinstance(v, bool)
            }
            numbers["guard_rejections"] = len(data.get("guard_rejected") or [])  # what the memory guard kept out
            self.log_metrics(numbers, step=int(data.get("batch", 0) or 0))
        self.log_artifacts([_html(memory_dir)])


class CompareTracking:
    """A :class:`memento.optimize.compare.CompareObserver` logging one nested MLflow run per method.

    Open it around ``compare(...)``: the parent run holds the comparison's settings, totals and files; each method
    gets a child run from its first phase to its end (so DSPy traces of that method land under it).
    """

    def __init__(self, tracker: MLflowTracker, *, settings: Any, name: str) -> None:
        self.tracker = tracker
        self.settings = settings
        self.name = name
        self._parent: contextlib.ExitStack | None = None
        self._child: contextlib.ExitStack | None = None
        self._child_method: str | None = None
        self.child_runs: dict[str, str] = {}

    def __enter__(self) -> CompareTracking:
        self._parent = contextlib.ExitStack()
        self.parent_run = self._parent.enter_context(self.tracker.run(self.name, settings=self.settings))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._end_child()
        assert self._parent is not None
        self._parent.__exit__(exc_type, exc, tb)
        self.tracker.close()

    def _start_child(self, method: str) -> None:
        if self._child_method == method:
            return
        self._end_child()
        self._child = contextlib.ExitStack()
        active = self._child.enter_context(self.tracker.run(method, nested=True, tags={"memento.method": method}))
        self._child_method = method
        self.child_runs[method] = active.info.run_id

    def _end_child(self) -> None:
        if self._child is not None:
            self._child.close()
        self._child, self._child_method = None, None

    def phase(self, method: str, phase: str, total: int | None) -> None:
        self._start_child(method)

    def example(self, method: str, phase: str, score: float, error: bool) -> None:
        return None  # the per-example scores are logged from the method's result (in example order)

    def method_done(self, result: Any, method_dir: Path) -> None:
        self._start_child(result.method)
        t = self.tracker
        t.mlflow.set_tags({"memento.status": result.status, "memento.kind": result.kind})
        if result.budgets:
            t.mlflow.log_params({f"budget.{k}": str(v)[:6000] for k, v in list(result.budgets.items())[:_MAX_PARAMS]})
        t.log_scores(list(result.scores))
        from memento.metrics.stats import bootstrap_ci

        metrics: dict[str, Any] = {"failed_examples": result.failed_examples}
        if result.scores:
            mean, low, high = bootstrap_ci(result.scores, n=1000, seed=self.settings.run.seed)
            metrics.update({"mean": mean, "ci_low": low, "ci_high": high})
        for phase in ("train", "test"):
            cost = getattr(result.costs, phase)
            metrics.update(
                {
                    f"{phase}_lm_calls": cost.lm_calls,
                    f"{phase}_tokens": cost.tokens,
                    f"{phase}_judge_calls": cost.judge_calls,
                    f"{phase}_searches": cost.searches,
                    f"{phase}_fetches": cost.fetches,
                    f"{phase}_seconds": cost.wall_seconds,
                    f"{phase}_dollars": cost.dollars,
                }
            )
        metrics.update({f"measure_{k}": v for k, v in result.measures.items()})
        t.log_metrics(metrics)
        t.log_artifacts([p for p in sorted(method_dir.iterdir()) if p.name != "done"] if method_dir.is_dir() else [])
        self._end_child()

    def log_report(self, report: Any, out_dir: Path) -> None:
        """The parent run's summary: per-method means and differences, totals, files, plots and the HTML report."""
        t = self.tracker
        metrics: dict[str, Any] = {}
        for name, res in report.methods.items():
            key = name.replace(":", "_")
            metrics.update({f"{key}.mean": res.mean, f"{key}.ci_low": res.ci_low, f"{key}.ci_high": res.ci_high})
            if res.vs_baseline is not None:
                metrics[f"{key}.vs_baseline"] = res.vs_baseline.diff
        totals = report.totals
        metrics.update({"total_lm_calls": totals.lm_calls, "total_tokens": totals.tokens,
                        "total_seconds": totals.wall_seconds, "total_dollars": totals.dollars})  # fmt: skip
        t.log_metrics(metrics)
        files = [out_dir / n for n in ("results.json", "results.md", "split.json", "score_vs_cost.png",
                                       "learning_curve.png", "memory_growth.png")]  # fmt: skip
        t.log_artifacts([*files, _html(out_dir)])


def _html(path: Any) -> Path:
    """Write the HTML report of ``path`` (to log it as an artifact); a failure is logged, never raised. A memory in
    PostgreSQL gets its report in a temporary directory."""
    import tempfile

    from memento.memory.location import is_postgres
    from memento.records.html_report import write_report

    out = Path(tempfile.mkdtemp(prefix="memento-report-")) / "report.html" if is_postgres(path) else None
    try:
        return write_report(path, out=out)
    except Exception as exc:
        logger.warning("no HTML report for %s: %s", path, exc)
        return out or Path(path) / "report.html"
