"""MEMENTO's legal protocol (§4.1), rebuilt: recent JUSTICE cases, a leakage filter, then a seeded 180-case split.

:class:`LegalProtocol` reads the JUSTICE CSV and writes into one directory:

1. ``candidates.csv``: the rows whose decision term is ``min_term`` (2010) or later (a range such as ``2012-2013``
   counts by its last year). Rows the legal loader cannot use (a blank label, no facts) are counted and left out.
2. The **leakage filter**: a web agent (:class:`memento.programs.leakage_probe.LeakageProbe`) is given each case's
   facts (anonymised, exactly as every method sees them) under the case's search cutoff, January 1st of (term - 5).
   JUSTICE holds decision terms, not decision dates, so that cutoff stands in for "decision date - 5 years": it
   lies four to five years before the decision. A case whose exact outcome the agent retrieves (it says it found
   the decision, names the party that won, and a page it read holds the sentence it quotes) is dropped. Each verdict
   is appended to ``screening.jsonl`` as its case finishes: a killed run resumes there, and a case whose screening
   failed (an unparseable reply, a broken page) is tried again on the next run.
3. ``kept.csv`` (the screened candidates not dropped, rows unchanged, in file order), ``dropped.jsonl`` (one line
   per dropped case: the agent's claim, the page that holds its quote with that page's date, the queries it sent
   and the pages it read), ``train.csv`` and ``test.csv``: exactly the split ``memento compare --task legal --data
   kept.csv --n-train 60 --n-test 120 --seed 42`` makes (the same loader, the same
   :func:`memento.optimize.compare_data.split_examples`), rows in the split's order; ``summary.json`` (counts per
   stage, the rules, the settings that decided the verdicts, the split's ids, LM usage).

Example:
    >>> protocol = LegalProtocol(probe=LeakageProbe(web=web_tools_factory(settings)))  # doctest: +SKIP
    >>> report = protocol.run("justice.csv", "runs/legal")  # doctest: +SKIP
    >>> report.counts["kept"], len(report.train), len(report.test)  # doctest: +SKIP
    (512, 60, 120)
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dspy

from memento.core.error_policy import handle_error
from memento.core.errors import ConfigError, DataError
from memento.tasks.legal import LegalTask, row_id, term_cutoff
from memento.utils.files import atomic_write_text
from memento.utils.scrub import scrub

__all__ = ["LegalProtocol", "LegalProtocolReport", "MIN_TERM", "JOURNAL", "case_year"]

logger = logging.getLogger(__name__)

MIN_TERM = 2010  # MEMENTO §4.1: cases decided after 2010
JOURNAL = "screening.jsonl"
_FINAL = ("kept", "dropped")


def case_year(term: str) -> int | None:
    """The decision year of a JUSTICE ``term``: a range counts by its last year; ``None`` without a year.

    Example:
        >>> case_year("2012"), case_year("2012-2013"), case_year("")
        (2012, 2013, None)
    """
    cutoff = term_cutoff(term, years=0)
    return None if cutoff is None else cutoff.year


@dataclass
class LegalProtocolReport:
    """What one run of the protocol found and wrote (``summary.json`` holds the same and more).

    ``counts``: ``rows``, ``no_term``, ``recent`` (term >= min_term), ``loaded`` (usable by the loader),
    ``screened_now`` (screened in this run), ``kept``, ``dropped``, ``failed`` (screening failed: left out, tried
    again on the next run). ``train``/``test``: the split's case ids in order (empty when ``split_error``).
    """

    out_dir: Path
    counts: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    train: list[str] = field(default_factory=list)
    test: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    split_error: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Plan:
    """The cases of one run: the source's header, the loaded candidates, the journal, what is left to screen."""

    data: Path
    out: Path
    header: list[str]
    examples: list[dspy.Example]
    journal: _Journal
    todo: list[dspy.Example]
    report: LegalProtocolReport
    started: float


def _csv_reader(text: str) -> csv.DictReader[str]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    return csv.DictReader(io.StringIO(text, newline=""))


def _read_rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """The header and rows of a JUSTICE CSV (values as written)."""
    from memento.core.paths import read_text

    reader = _csv_reader(read_text(path, what="JUSTICE file"))
    rows: list[dict[str, str]] = []
    try:
        rows.extend(reader)
    except csv.Error as exc:
        raise DataError(f"{path}:{reader.line_num}: not a CSV row ({exc})") from None
    if "term" not in (reader.fieldnames or []):
        raise DataError(f"{path}: not a JUSTICE file (no term column)")
    return list(reader.fieldnames or []), rows


def _rows_by_id(path: Path) -> dict[str, dict[str, str]]:
    """The rows of a CSV file by the id the legal loader gives them (:func:`memento.tasks.legal.row_id`)."""
    from memento.core.paths import read_text

    reader = _csv_reader(read_text(path, what="JUSTICE file"))
    rows: dict[str, dict[str, str]] = {}
    for row in reader:
        rows.setdefault(row_id(row, reader.line_num), row)
    return rows


def _write_rows(path: Path, header: list[str], rows: list[dict[str, str]]) -> None:
    """Rows written with the source's columns and values (quoted as the csv module needs), atomically, through the
    one scrubber of every file the project writes (the JUSTICE file holds nothing it masks)."""
    buffer = io.StringIO(newline="")
    writer = csv.DictWriter(buffer, fieldnames=header, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buffer.getvalue())


class _Journal:
    """``screening.jsonl``: a header (the settings that decide verdicts), then one verdict per line, flushed as each
    case finishes; a case's last verdict wins, and a torn line (a kill mid-write) is ignored."""

    def __init__(self, path: Path, key: dict[str, Any], *, fresh: bool) -> None:
        from memento.records.provenance import key_mismatch

        self.path = path
        self.records: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        if fresh or not path.exists():
            atomic_write_text(path, json.dumps({"type": "header", "key": key}, default=str) + "\n")
            return
        lines = path.read_text(encoding="utf-8").splitlines()
        try:
            header = json.loads(lines[0]) if lines else None
        except json.JSONDecodeError:
            header = None
        if not isinstance(header, dict) or header.get("type") != "header":
            raise ConfigError(f"{path} is not a screening journal: pass --fresh to screen again, or use another --out")
        differ = key_mismatch(header.get("key") or {}, json.loads(json.dumps(key, default=str)))
        if differ:
            raise ConfigError(
                f"{path} was screened with other settings ({differ}): pass --fresh to screen again, or use another "
                "--out"
            )
        for lineno, line in enumerate(lines[1:], 2):
            try:
                record = json.loads(line)
                self.records[str(record["id"])] = record
            except (json.JSONDecodeError, KeyError, TypeError):
                logger.warning("%s:%d: torn journal line ignored (that case is screened again)", path, lineno)

    def verdict(self, case_id: str) -> str | None:
        """The recorded verdict of a case (``kept``, ``dropped``, ``failed``), or ``None``."""
        return self.records.get(case_id, {}).get("verdict")

    def append(self, record: dict[str, Any]) -> None:
        line = scrub(json.dumps(record, ensure_ascii=False, default=str))
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())
            self.records[str(record["id"])] = json.loads(line)


class LegalProtocol:
    """MEMENTO's legal protocol (see the module docstring): :meth:`run`, or :meth:`prepare`, :meth:`screen` and
    :meth:`finish` when a caller shows progress between them.

    Args:
        probe: the leakage agent, ``probe(facts=, cutoff=) -> Prediction`` with ``found``, ``winning_party``,
            ``support``... (a :class:`~memento.programs.leakage_probe.LeakageProbe`).
        task: the legal task whose loader reads the rows (its ``cutoff_years`` sets the cutoff rule; 5 in MEMENTO).
        min_term: the earliest decision term screened (2010).
        n_train, n_test, seed: the split (60 / 120, seed 42).
        threads: cases screened at once.
        key: the settings that decide verdicts (model, web backend, step cap...), recorded in the journal: a rerun
            with other settings is refused unless ``fresh``.
        roles: the LM roles (their usage is metered into the summary).
        on_case: called with each verdict record as it is written (progress).
    """

    def __init__(
        self,
        *,
        probe: Callable[..., Any],
        task: LegalTask | None = None,
        min_term: int = MIN_TERM,
        n_train: int = 60,
        n_test: int = 120,
        seed: int = 42,
        threads: int = 4,
        key: dict[str, Any] | None = None,
        roles: Any | None = None,
        on_case: Callable[[dict[str, Any]], None] | None = None,
    ) -> None:
        if n_train < 1 or n_test < 1:
            raise ConfigError(f"the split needs at least one train and one test case (got {n_train}/{n_test})")
        self.probe = probe
        self.task = task if task is not None else LegalTask()
        self.min_term = min_term
        self.n_train = n_train
        self.n_test = n_test
        self.seed = seed
        self.threads = threads
        self.key = dict(key or {})
        self.roles = roles
        self.on_case = on_case
        self._usage: Any = None

    def run(
        self, data: str | Path, out_dir: str | Path, *, limit: int | None = None, fresh: bool = False
    ) -> LegalProtocolReport:
        """Filter, screen (resuming ``screening.jsonl``), and write every file; see the module docstring.

        Args:
            data: the JUSTICE CSV.
            out_dir: the directory written (created when missing).
            limit: read only the first ``limit`` rows (a trial run).
            fresh: discard an earlier journal in ``out_dir`` instead of resuming it.

        Raises:
            DataError: the data file is not a JUSTICE CSV.
            ConfigError: the journal was written with other settings (and ``fresh`` is not set).
            LMUnavailableError: the LM failed fatally (the cases screened so far stay in the journal).
        """
        plan = self.prepare(data, out_dir, limit=limit, fresh=fresh)
        self.screen(plan)
        return self.finish(plan)

    # -- 1. the candidates -----------------------------------------------------------------------------------------
    def prepare(self, data: str | Path, out_dir: str | Path, *, limit: int | None = None, fresh: bool = False) -> _Plan:
        """Select the recent cases, write ``candidates.csv``, load them, open the journal (see :meth:`run`)."""
        from memento.records.provenance import file_sha256

        started = time.perf_counter()
        data, out = Path(data), Path(out_dir)
        header, rows = _read_rows(data)
        rows = rows[:limit] if limit is not None else rows
        years = [case_year(row.get("term") or "") for row in rows]
        recent = [row for row, year in zip(rows, years, strict=True) if year is not None and year >= self.min_term]
        report = LegalProtocolReport(out_dir=out)
        report.counts.update(rows=len(rows), no_term=years.count(None), recent=len(recent))
        out.mkdir(parents=True, exist_ok=True)
        _write_rows(out / "candidates.csv", header, recent)
        examples = self.task.load(out / "candidates.csv") if recent else []
        load = self.task.last_load_report
        report.skipped = dict(load.reasons) if recent and load is not None else {}
        key = {
            "data_sha256": file_sha256(data),
            "limit": limit,
            "min_term": self.min_term,
            "cutoff_years": self.task.cutoff_years,
            **self.key,
        }
        journal = _Journal(out / JOURNAL, key, fresh=fresh)
        todo = [ex for ex in examples if journal.verdict(str(ex.id)) not in _FINAL]
        return _Plan(data, out, header, examples, journal, todo, report, started)

    # -- 2. the leakage filter -------------------------------------------------------------------------------------
    def screen(self, plan: _Plan) -> None:
        """Screen every case left in ``plan.todo``, appending each verdict to the journal as it finishes."""
        from memento.execution.threads import run_parallel
        from memento.records.usage import UsageMeter

        def one(example: dspy.Example) -> None:
            record = self._verdict(example)
            plan.journal.append(record)
            if self.on_case is not None:
                self.on_case(record)

        with UsageMeter(self.roles) as meter:
            run_parallel(one, plan.todo, threads=self.threads)
        self._usage = meter.usage()

    def _verdict(self, example: dspy.Example) -> dict[str, Any]:
        """Screen one case: ``kept``, ``dropped`` (its exact outcome was retrieved) or ``failed``."""
        from memento.programs.leakage_probe import outcome_leaked

        record: dict[str, Any] = {
            "id": str(example.id),
            "docket": example.get("docket"),
            "term": example.get("term"),
            "cutoff": example.cutoff,
            "label": example.winning_party,
        }
        started = time.perf_counter()
        try:
            pred = self.probe(facts=example.facts, cutoff=example.cutoff)
        except Exception as exc:  # a fatal error (LM unavailable) is raised again: the run stops, the journal stays
            failure = handle_error(exc, where=f"leakage screening of case {example.id}", log=logger)
            return {**record, "verdict": "failed", "error": str(failure), "seconds": _since(started)}
        leaked = outcome_leaked(pred, example.winning_party)
        calls = list(pred.tool_calls)
        return {
            **record,
            "verdict": "dropped" if leaked else "kept",
            "reason": _reason(pred, example.winning_party),
            "agent": {name: pred.get(name) for name in ("found", "winning_party", "disposition", "quote", "source")},
            "evidence": pred.support.model_dump(mode="json") if pred.support is not None else None,
            "queries": [str(c.args.get("query", "")) for c in calls if c.kind == "search_web"],
            "pages": [c.page.address for c in calls if c.page is not None],
            "steps": pred.steps,
            "seconds": _since(started),
        }

    # -- 3. the files ----------------------------------------------------------------------------------------------
    def finish(self, plan: _Plan) -> LegalProtocolReport:
        """Write ``kept.csv``, ``dropped.jsonl``, the split and ``summary.json`` from the journal."""
        report, journal, out = plan.report, plan.journal, plan.out
        ids = [str(ex.id) for ex in plan.examples]
        kept = [i for i in ids if journal.verdict(i) == "kept"]
        dropped = [journal.records[i] for i in ids if journal.verdict(i) == "dropped"]
        report.failed = [i for i in ids if journal.verdict(i) not in _FINAL]
        report.counts.update(
            loaded=len(ids),
            screened_now=len(plan.todo),
            kept=len(kept),
            dropped=len(dropped),
            failed=len(report.failed),
        )
        candidates = _rows_by_id(out / "candidates.csv")
        _write_rows(out / "kept.csv", plan.header, [candidates[i] for i in kept])
        lines = [json.dumps({k: v for k, v in d.items() if k != "seconds"}, ensure_ascii=False) for d in dropped]
        atomic_write_text(out / "dropped.jsonl", "".join(line + "\n" for line in lines))  # no timing: reproducible
        by_id = {str(ex.id): ex for ex in plan.examples}
        self._split(out, plan.header, [by_id[i] for i in kept], [candidates[i] for i in kept], report)
        report.summary = self._summary(plan, time.perf_counter() - plan.started)
        atomic_write_text(out / "summary.json", json.dumps(report.summary, indent=2, ensure_ascii=False))
        return report

    def _split(
        self,
        out: Path,
        header: list[str],
        examples: list[dspy.Example],
        rows: list[dict[str, str]],
        report: LegalProtocolReport,
    ) -> None:
        """``train.csv``/``test.csv``: the kept cases as ``memento compare --data kept.csv`` splits them.

        ``examples`` are the kept cases as the loader reads ``kept.csv`` (the same rows in the same order: compare's
        seeded shuffle of positions picks the same rows), ``rows`` their source rows, position for position.
        """
        from memento.optimize.compare_data import split_examples

        for name in ("train.csv", "test.csv"):
            (out / name).unlink(missing_ok=True)  # never a stale split beside new kept cases
        try:
            train, test = split_examples(examples, n_train=self.n_train, n_test=self.n_test, seed=self.seed)
        except ConfigError as exc:
            report.split_error = str(exc)
            return
        position = {id(example): i for i, example in enumerate(examples)}
        report.train, report.test = [str(ex.id) for ex in train], [str(ex.id) for ex in test]
        _write_rows(out / "train.csv", header, [rows[position[id(ex)]] for ex in train])
        _write_rows(out / "test.csv", header, [rows[position[id(ex)]] for ex in test])

    def _summary(self, plan: _Plan, seconds: float) -> dict[str, Any]:
        report, usage = plan.report, self._usage
        header = json.loads(plan.journal.path.read_text(encoding="utf-8").splitlines()[0])
        kept = plan.out / "kept.csv"
        return {
            "protocol": "MEMENTO §4.1 legal: recent cases, leakage filter, seeded split",
            "data": str(plan.data),
            "rules": {
                "min_term": self.min_term,
                "term": "a range such as 2012-2013 counts by its last year",
                "cutoff": f"January 1st of (term - {self.task.cutoff_years}): JUSTICE holds decision terms, not "
                f"decision dates, so this stands in for (decision date - {self.task.cutoff_years} years)",
                "leak": "the agent says it found the decision, names the party that won, and a page it read holds "
                "the sentence it quotes",
            },
            "key": header.get("key"),
            "counts": report.counts,
            "skipped_by_loader": report.skipped,
            "failed": report.failed,
            "split": {
                "seed": self.seed,
                "n_train": self.n_train,
                "n_test": self.n_test,
                "error": report.split_error,
                "train_ids": report.train,
                "test_ids": report.test,
                "same_as": f"memento compare --task legal --data {kept} --n-train {self.n_train} "
                f"--n-test {self.n_test} --seed {self.seed}",
            },
            "usage_this_run": {
                "lm_calls": usage.lm_calls if usage is not None else 0,
                "prompt_tokens": usage.prompt_tokens if usage is not None else 0,
                "completion_tokens": usage.completion_tokens if usage is not None else 0,
            },
            "seconds": round(seconds, 3),
        }


def _since(started: float) -> float:
    return round(time.perf_counter() - started, 3)


def _reason(pred: Any, label: str) -> str:
    """Why a case was kept or dropped, in one line."""
    if not pred.found:
        return "the agent found no page stating the decision"
    if pred.winning_party != label:
        return f"the agent reported the {pred.winning_party} as the winner; the {label} won"
    if pred.support is None:
        return "the agent named the winner, but no page it read holds the sentence it quoted"
    return f"retrieved: {pred.support.url} holds the quoted decision"
