"""Progress on stderr: rich bars with elapsed time, ETA and a running mean score; a live status line for one run.

Results go to stdout; everything here writes to stderr, so ``--json`` output stays machine-readable. The console
is built when progress starts, so ``FORCE_COLOR``/``TTY_COMPATIBLE`` (rich's forced terminal) apply in tests.

Example:
    >>> from memento.cli.progress import ScoreProgress
    >>> with ScoreProgress("eval closed_book", total=3) as bar:  # doctest: +SKIP
    ...     bar.advance(score=1.0)
"""

from __future__ import annotations

import threading
import time
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from memento.records.usage import ModuleStackCallback, current_stage

__all__ = ["progress_console", "ScoreProgress", "LMCallCounter", "RunStatus", "CompareProgress"]


def progress_console() -> Console:
    """A console on stderr, created now (so a forced terminal set in the environment applies)."""
    return Console(stderr=True, soft_wrap=False)


class _Mean:
    """A running mean of the scores seen so far (thread-safe)."""

    def __init__(self) -> None:
        self.total = 0.0
        self.n = 0
        self.errors = 0
        self._lock = threading.Lock()

    def add(self, score: float | None, *, error: bool = False) -> None:
        with self._lock:
            if score is not None:
                self.total += float(score)
                self.n += 1
            self.errors += int(error)

    def text(self) -> str:
        mean = f"mean {self.total / self.n:.3f}" if self.n else "mean –"
        return mean + (f" · {self.errors} errors" if self.errors else "")


class ScoreProgress:
    """One or more progress bars (one per task) with M/N, elapsed, ETA and the running mean of each.

    Use :meth:`add` to start a bar (``total=None``: a spinner with elapsed time, for phases without examples),
    :meth:`advance` for each finished example, :meth:`done` to close a bar. Safe to call from worker threads.
    """

    def __init__(self, label: str | None = None, *, total: int | None = None, console: Console | None = None) -> None:
        self.console = console or progress_console()
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}", markup=False),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TextColumn("{task.fields[mean]}", markup=False),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        self._means: dict[Any, _Mean] = {}
        self._lock = threading.Lock()
        self.current: Any = None
        if label is not None:
            self.current = self.add(label, total=total)

    def add(self, label: str, *, total: int | None = None) -> Any:
        """Start a bar; returns its id (also the default of :meth:`advance`)."""
        task = self.progress.add_task(label, total=total, mean="")
        with self._lock:
            self._means[task] = _Mean()
            self.current = task
        return task

    def advance(self, *, score: float | None = None, error: bool = False, task: Any = None) -> None:
        """One example finished (its score, or ``error``)."""
        task = self.current if task is None else task
        if task is None:
            return
        mean = self._means[task]
        mean.add(score, error=error)
        self.progress.update(task, advance=1, mean=mean.text())

    def note(self, text: str, *, task: Any = None) -> None:
        """Replace the bar's right-hand note (e.g. LM calls so far for a phase without examples)."""
        task = self.current if task is None else task
        if task is not None:
            self.progress.update(task, mean=text)

    def done(self, *, task: Any = None, note: str | None = None) -> None:
        """Close a bar (a spinner becomes complete)."""
        task = self.current if task is None else task
        if task is None:
            return
        current = self.progress.tasks[self.progress.task_ids.index(task)]
        total = current.total if current.total is not None else current.completed or 1
        fields: dict[str, Any] = {"mean": note} if note is not None else {}
        self.progress.update(task, total=total, completed=total, **fields)
        self.progress.stop_task(task)

    def __enter__(self) -> ScoreProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


class LMCallCounter(ModuleStackCallback):
    """A DSPy callback counting LM calls and remembering the stage of the latest one (for status lines)."""

    def __init__(self, *, on_call: Any = None) -> None:
        self.calls = 0
        self.stage = ""
        self.on_call = on_call  # called with the running count after each call and when the stage changes
        self._lock = threading.Lock()

    def on_lm_start(self, call_id: str, instance: Any, inputs: dict[str, Any]) -> None:
        stage = current_stage()
        with self._lock:
            changed, self.stage = stage != self.stage, stage
            calls = self.calls
        if changed and self.on_call is not None:
            self.on_call(calls)

    def on_lm_end(self, call_id: str, outputs: Any | None, exception: Exception | None = None) -> None:
        with self._lock:
            self.calls += 1
            calls = self.calls
        if self.on_call is not None:
            self.on_call(calls)

    def absorb_remote(self, outcome: Any) -> None:
        """Count the LM calls another process of the run made (a Ray worker's task)."""
        with self._lock:
            self.calls += len(outcome.call_errors)
            calls = self.calls
        if self.on_call is not None:
            self.on_call(calls)

    def install(self) -> Any:
        """A ``dspy.context`` adding this counter to the active callbacks."""
        import dspy

        return dspy.context(callbacks=[*dspy.settings.get("callbacks", []), self])


class RunStatus:
    """A live status line for one research run: wave, stage, sub-questions, LM calls, elapsed.

    Feed it the exploration tree's events with :meth:`on_tree_event`; LM calls and the current stage come from
    an :class:`LMCallCounter` installed for the run (:meth:`__enter__` installs it).
    """

    def __init__(self, label: str, *, console: Console | None = None) -> None:
        from rich.live import Live

        self.label = label
        self.console = console or progress_console()
        self.counter = LMCallCounter(on_call=lambda calls: self.refresh())
        self.wave: int | None = None
        self.sub_questions = 0
        self.started = time.perf_counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._ctx: Any = None
        self.live = Live(self.render(), console=self.console, refresh_per_second=4, transient=False)

    def on_tree_event(self, event: Any) -> None:
        """Update from an :class:`memento.programs.adaptive_exploration_tree.TreeEvent`."""
        if event.kind in ("decompose", "reflect"):
            self.sub_questions += len(event.nodes)
            self.wave = event.wave if event.kind == "decompose" else event.wave + 1
        elif event.kind == "wave":
            self.wave = event.wave
        self.refresh()

    def refresh(self) -> None:
        """Redraw the line now (a stage change or an event shows even between the periodic redraws)."""
        if self.live.is_started:
            self.live.update(self.render(), refresh=True)

    def render(self) -> Text:
        """The status line as it is now."""
        elapsed = time.perf_counter() - self.started
        parts = [self.label]
        if self.wave is not None:
            parts.append(f"wave {self.wave}")
        stage = self.counter.stage if self.counter.calls or self.counter.stage else "starting"
        parts += [f"stage {stage}", f"{self.sub_questions} sub-questions", f"{self.counter.calls} LM calls"]
        parts.append(f"{elapsed:.1f}s")
        return Text(" · ".join(parts), no_wrap=True, overflow="ellipsis")

    def _tick(self) -> None:
        while not self._stop.wait(0.25):
            self.live.update(self.render())

    def __enter__(self) -> RunStatus:
        self._ctx = self.counter.install()
        self._ctx.__enter__()
        self.live.start()
        self._thread = threading.Thread(target=self._tick, name="memento-status", daemon=True)
        self._thread.start()
        return self

    def finish(self, trajectory: Any) -> None:
        """Take the final counts from the run's trajectory (its sub-questions, whatever events were seen)."""
        self.sub_questions = max(0, len(getattr(trajectory, "nodes", None) or []) - 1)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        failed = bool(exc) and exc[0] is not None
        if failed:  # the run failed: its one error line says what happened, the status line goes away
            self.live.transient = True
        self.live.update(self.render())
        self.live.stop()
        if not failed and not self.console.is_terminal:  # rich ends the line on a terminal only
            self.console.line()
        self._ctx.__exit__(*exc)


class CompareProgress(ScoreProgress):
    """Progress of ``memento compare``: a bar per method and phase (train: elapsed and LM calls; test: examples,
    running mean, ETA). It is a :class:`memento.optimize.compare.CompareObserver`; ``forward`` gets every event
    too (MLflow tracking)."""

    def __init__(self, *, console: Console | None = None, forward: Any = None) -> None:
        super().__init__(console=console)
        self.forward = forward
        self.counter = LMCallCounter(on_call=self._on_call)
        self._tasks: dict[tuple[str, str], Any] = {}
        self._train: tuple[Any, int] | None = None  # the running train bar and the LM calls when it started
        self._ctx: Any = None

    def _on_call(self, calls: int) -> None:
        if self._train is not None:
            task, start = self._train
            self.note(f"{calls - start} LM calls", task=task)

    def phase(self, method: str, phase: str, total: int | None) -> None:
        self._close_train()
        task = self.add(f"{method} · {phase}", total=total)
        self._tasks[(method, phase)] = task
        if phase == "train":
            self._train = (task, self.counter.calls)
        if self.forward is not None:
            self.forward.phase(method, phase, total)

    def example(self, method: str, phase: str, score: float, error: bool) -> None:
        task = self._tasks.get((method, phase))
        if task is not None:
            self.advance(score=score, error=error, task=task)
        if self.forward is not None:
            self.forward.example(method, phase, score, error)

    def method_done(self, result: Any, method_dir: Any) -> None:
        self._close_train()
        test = self._tasks.get((result.method, "test"))
        if test is not None and result.status != "done":
            self.done(task=test, note=f"{result.status}: {result.error or ''}"[:60])
        if self.forward is not None:
            self.forward.method_done(result, method_dir)

    def _close_train(self) -> None:
        if self._train is not None:
            task, start = self._train
            self._train = None
            self.done(task=task, note=f"{self.counter.calls - start} LM calls")

    def __enter__(self) -> CompareProgress:
        self._ctx = self.counter.install()
        self._ctx.__enter__()
        super().__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._close_train()
        super().__exit__(*exc)
        self._ctx.__exit__(*exc)
