"""An evaluation's journal: every finished example appended to disk the moment it finishes, read back to resume.

``results.json`` is written when an evaluation ends (or stops cleanly); the journal holds what finished until then
even when the process cannot write anything more (SIGKILL, a second Ctrl-C, a power cut). It is a JSON-lines file,
``<out>/journal.jsonl``: a header line with the run key, then one line per finished example (its
:class:`~memento.metrics.evaluation.ExampleResult` and its trajectory), each appended, flushed and ``fsync``-ed
before the next example is reported. A line cut short by a crash is ignored on reading. Lines are scrubbed of
secrets like every file memento writes.

Resuming reads :meth:`EvalJournal.finished` (with the finished examples of an earlier ``results.json``, see
``memento eval``); once a complete ``results.json`` is written the journal is removed. The journal is the one place
finished examples are recorded, whoever runs them: worker threads here, or remote workers whose results the driver
appends.

Example:
    >>> import tempfile
    >>> from memento.metrics.eval_journal import EvalJournal
    >>> from memento.metrics.example_result import ExampleResult
    >>> journal = EvalJournal.in_dir(tempfile.mkdtemp(), run_key={"method": "closed_book"})
    >>> journal.append(ExampleResult(index=0, id="q0", score=1.0))
    >>> [(r.id, r.score) for r in journal.finished()]
    [('q0', 1.0)]
    >>> journal.close()
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memento.core.errors import ConfigError, DataError

if TYPE_CHECKING:
    from memento.metrics.example_result import ExampleResult

__all__ = ["EvalJournal", "JOURNAL_NAME"]

logger = logging.getLogger(__name__)

JOURNAL_NAME = "journal.jsonl"
_FORMAT = 1


class EvalJournal:
    """Append-only record of an evaluation's finished examples (thread-safe).

    Args:
        path: the journal file (created with its directory at the first append).
        run_key: what identifies the run (:func:`memento.records.provenance.run_key`): a journal written under another
        key
            is refused in one line when read or appended to, so no run resumes another's examples.
    """

    def __init__(self, path: str | Path, *, run_key: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.run_key = run_key
        self.memory: dict[str, Any] | None = None  # the memory pins the examples read (written in the header)
        self._lock = threading.Lock()
        self._file: Any = None
        self.appended = 0

    @classmethod
    def in_dir(cls, directory: str | Path, *, run_key: dict[str, Any] | None = None) -> EvalJournal:
        """The journal of an output directory (``<directory>/journal.jsonl``)."""
        return cls(Path(directory) / JOURNAL_NAME, run_key=run_key)

    # -- reading -----------------------------------------------------------------------------------------
    def header(self) -> dict[str, Any] | None:
        """The journal's first line (run key, memory pins), or ``None`` when there is no readable journal."""
        if not self.path.exists():
            return None
        with self.path.open(encoding="utf-8", errors="replace") as handle:
            first = handle.readline()
        try:
            data = json.loads(first)
        except json.JSONDecodeError:
            return None
        return data if isinstance(data, dict) else None

    def _check_key(self, header: Any) -> None:
        if not isinstance(header, dict) or header.get("memento_journal") != _FORMAT:
            raise ConfigError(f"{self.path} is not an evaluation journal; use another --out or --fresh")
        if self.run_key is None:
            return
        from memento.records.provenance import key_mismatch

        old = header.get("run_key")
        diff = key_mismatch(old, self.run_key) if isinstance(old, dict) else "no run key"
        if diff is not None:
            raise ConfigError(
                f"{self.path} holds examples of another run ({diff}); use another --out, or --fresh to replace them"
            )

    def finished(self) -> list[ExampleResult]:
        """The examples recorded so far, latest record per example index, in index order (trajectories attached).

        A line that cannot be read (the last one, cut short by a crash) is skipped.

        Raises:
            ConfigError: the file is not a journal, or belongs to a run with another key.
        """
        from memento.core.types import Trajectory
        from memento.metrics.example_result import ExampleResult

        if not self.path.exists():
            return []
        records: dict[int, ExampleResult] = {}
        with self.path.open(encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle):
                try:
                    data = json.loads(line)
                except json.JSONDecodeError:
                    logger.warning("%s: line %d is incomplete or unreadable; skipped", self.path, number + 1)
                    continue
                if number == 0:
                    self._check_key(data)
                    continue
                try:
                    record = ExampleResult.model_validate(data["example"])
                    if data.get("trajectory") is not None:
                        record.trajectory = Trajectory.model_validate(data["trajectory"])
                except (KeyError, TypeError, ValueError):
                    logger.warning("%s: line %d is not an example record; skipped", self.path, number + 1)
                    continue
                records[record.index] = record
        return [records[i] for i in sorted(records)]

    # -- writing -----------------------------------------------------------------------------------------
    def _open(self) -> Any:
        if self._file is not None:
            return self._file
        if self.path.exists() and self.path.stat().st_size > 0:
            with self.path.open(encoding="utf-8", errors="replace") as handle:
                first = handle.readline()
            try:
                self._check_key(json.loads(first))
            except json.JSONDecodeError:
                raise ConfigError(f"{self.path} is not an evaluation journal; use another --out or --fresh") from None
            self._file = self.path.open("a", encoding="utf-8")
            return self._file
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("w", encoding="utf-8")
        self._write_line({"memento_journal": _FORMAT, "run_key": self.run_key, "memory": self.memory})
        return self._file

    def _write_line(self, data: dict[str, Any]) -> None:
        from memento.utils.files import scrubbed_json

        self._file.write(scrubbed_json(data) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def append(self, record: ExampleResult) -> None:
        """Record one finished example (with its trajectory) durably before returning.

        Raises:
            DataError: the journal cannot be written (one line; a fatal error: the run stops, what finished is kept).
        """
        line = {
            "example": record.model_dump(mode="json"),
            "trajectory": record.trajectory.model_dump(mode="json") if record.trajectory is not None else None,
        }
        with self._lock:
            try:
                self._open()
                self._write_line(line)
            except OSError as exc:  # a full disk, a vanished directory: the run stops in one line
                raise DataError(f"cannot write the evaluation journal {self.path}: {exc.strerror or exc}") from None
            self.appended += 1

    def close(self) -> None:
        """Close the file (the journal stays on disk)."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def discard(self) -> None:
        """Close and remove the journal (its examples are in a complete ``results.json`` now)."""
        self.close()
        self.path.unlink(missing_ok=True)
