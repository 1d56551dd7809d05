"""The ``legal`` task (JUSTICE): neutral case facts -> which party the U.S. Supreme Court ruled for.

Loader for the JUSTICE CSV (columns ``ID, name, docket, term, first_party, second_party, facts (HTML),
first_party_winner, disposition, issue_area, ...``):

* ``facts`` HTML becomes plain text, then party names become "the petitioner" (``first_party``) and
  "the respondent" (``second_party``) with :class:`memento.tasks.pii.PartyAnonymizer`, before any model sees
  them; an optional LLM scrub (:class:`memento.tasks.pii_scrub.PartyNameScrubber`) runs on top.
* ``first_party_winner`` True means the petitioner won; rows with a blank or unknown label are skipped, as are
  rows without facts or a usable term. Every skipped row is listed with its reason in ``task.last_load_report``.
* The search cutoff is January 1st of (decision term - 5) (a range such as ``1789-1850`` uses its last year),
  stored as ``example.cutoff`` (ISO date) and passed to programs as a control argument. MEMENTO sets it five years
  before the decision date; JUSTICE holds terms, not decision dates, so January 1st of (term - 5) stands in for it
  (four to five years before the decision). ``memento data legal`` (:mod:`memento.optimize.legal_protocol`) builds
  the paper's evaluation set from this file: cases of 2010 or later, a leakage filter, the seed-42 split.
* ``disposition``, ``issue_area``, the case name and the vote counts are not copied onto examples at all, so no
  program can pass them to a model.

Metric: the predicted ``winning_party`` (normalised) equals the label; ``make_metric("judge")`` gives an LLM
verdict judge under the ``judge_lm`` role.

Example:
    >>> from memento.tasks import get_task
    >>> task = get_task("legal")
    >>> task.input_fields, task.output_fields
    (['facts'], ['reasoning', 'winning_party', 'disposition'])
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import logging
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import dspy

from memento.core.errors import ConfigError, DataError
from memento.tasks.task import Task, register_task

__all__ = [
    "PredictCaseOutcome",
    "LegalTask",
    "LegalLoadReport",
    "SkippedRow",
    "term_cutoff",
    "normalize_party",
    "row_id",
]

logger = logging.getLogger(__name__)

_REQUIRED = ("first_party", "second_party", "facts", "first_party_winner", "term")
_YEAR = re.compile(r"\b(1[6-9]\d\d|2\d\d\d)\b")


class PredictCaseOutcome(dspy.Signature):
    """Predict the outcome of a United States Supreme Court case from a neutral statement of its facts, written
    before the decision. The parties' names have been replaced: "the petitioner" is the party that brought the
    case to the Supreme Court (usually the party that lost below), "the respondent" the other party.

    Do not try to identify the case, and do not rely on any outcome you may remember: reason only from the facts,
    the legal questions they raise, and the law and precedent as they stood when the case was argued. Decide which
    party the Court ruled for and how it disposed of the lower court's judgment (for example affirmed, reversed,
    reversed and remanded, vacated and remanded)."""

    facts: str = dspy.InputField(desc="the case facts, party names replaced by role placeholders")
    reasoning: str = dspy.OutputField(
        desc="the legal questions, the strongest arguments of each side, and why one wins"
    )
    winning_party: Literal["petitioner", "respondent"] = dspy.OutputField(desc="the party the Court ruled for")
    disposition: str = dspy.OutputField(desc="what the Court did with the lower court's judgment")


def term_cutoff(term: str, *, years: int = 5) -> dt.date | None:
    """January 1st of (term - ``years``); a range such as ``1789-1850`` uses its last year; ``None`` if no year.

    Example:
        >>> term_cutoff("1971"), term_cutoff("1789-1850")
        (datetime.date(1966, 1, 1), datetime.date(1845, 1, 1))
    """
    found = _YEAR.findall(str(term or ""))
    if not found:
        return None
    return dt.date(int(found[-1]) - years, 1, 1)


def row_id(row: dict[str, Any], line: int) -> str:
    """The id of a JUSTICE row: its ``ID``, else its ``docket``, else the line it ends on.

    Example:
        >>> row_id({"ID": "55840", "docket": "11-1184"}, 7), row_id({"docket": "11-1184"}, 7), row_id({}, 7)
        ('55840', '11-1184', '7')
    """
    return str(row.get("ID") or row.get("docket") or line)


def normalize_party(value: Any) -> Literal["petitioner", "respondent"] | None:
    """``"petitioner"``/``"respondent"`` from a model's answer ("The Petitioner", "appellee"...), else ``None``."""
    text = str(value or "").strip().lower()
    petitioner = any(w in text for w in ("petitioner", "appellant", "first party"))
    respondent = any(w in text for w in ("respondent", "appellee", "second party"))
    if petitioner == respondent:
        return None
    return "petitioner" if petitioner else "respondent"


@dataclass
class SkippedRow:
    """A CSV row the loader did not turn into an example."""

    line: int
    id: str
    reason: str


@dataclass
class LegalLoadReport:
    """What :meth:`LegalTask.load` did with a file."""

    path: str
    rows: int = 0
    loaded: int = 0
    skipped: list[SkippedRow] = field(default_factory=list)
    leaks: int = 0  # loaded rows where memento.tasks.pii.find_leaks still flags a party word (see docs/benchmarks.md)
    scrubbed: int = 0  # rows whose LLM scrub was accepted

    @property
    def reasons(self) -> dict[str, int]:
        """Skipped-row counts per reason."""
        return dict(Counter(s.reason for s in self.skipped))

    def summary(self) -> str:
        parts = [f"{self.loaded} examples from {self.rows} rows of {self.path}"]
        if self.skipped:
            parts.append("skipped " + ", ".join(f"{n} ({reason})" for reason, n in sorted(self.reasons.items())))
        if self.leaks:
            parts.append(f"{self.leaks} with a party name left")
        return "; ".join(parts)


def _csv_rows(reader: csv.DictReader[str], path: str | Path) -> Any:
    """The rows of a CSV reader; a malformed line is a :class:`DataError` naming the file and line."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise DataError(f"{path}:{reader.line_num}: not a CSV row ({exc})") from None
        yield row


@register_task
class LegalTask(Task):
    """Supreme Court outcome prediction on JUSTICE; accuracy on the winning party.

    Args:
        cutoff_years: years before the decision term where the search cutoff lies (5 in MEMENTO).
        llm_scrub: also run the LLM scrub over the anonymised facts while loading (off by default; uses DSPy's
            current LM or ``roles.lm``).
        roles: LM roles (the judge metric uses ``judge_lm``; the scrub uses ``lm``).
        threads: parallel scrub calls.
    """

    name = "legal"
    signature = PredictCaseOutcome
    metric_kinds = ("default", "judge")

    def __init__(
        self, *, cutoff_years: int = 5, llm_scrub: bool = False, roles: Any | None = None, threads: int = 4
    ) -> None:
        self.cutoff_years = cutoff_years
        self.llm_scrub = llm_scrub
        self.roles = roles
        self.threads = threads
        self.last_load_report: LegalLoadReport | None = None

    def load(self, path: str | Path, *, limit: int | None = None) -> list[dspy.Example]:
        """Read the JUSTICE CSV into anonymised examples (inputs ``facts`` and the control argument ``cutoff``).

        Raises:
            DataError: the file lacks a required column, or two loaded rows have the same id (``ID``, else
                ``docket``, else the line).
        """
        from memento.tasks._text import html_to_text
        from memento.tasks.pii import PartyAnonymizer, find_leaks

        csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
        report = LegalLoadReport(path=str(path))
        pending: list[tuple[dict[str, Any], str, str]] = []
        ids: dict[str, int] = {}  # id of a loaded row -> its line
        from memento.core.paths import read_text

        text = read_text(path, what="JUSTICE file")  # missing, directory, binary, not UTF-8: one line
        with io.StringIO(text, newline="") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in _REQUIRED if c not in (reader.fieldnames or [])]
            if missing:
                raise DataError(f"{path}: not a JUSTICE file (missing columns: {', '.join(missing)})")
            for row in _csv_rows(reader, path):
                if limit is not None and len(pending) >= limit:
                    break
                report.rows += 1
                line = reader.line_num
                case_id = row_id(row, line)
                label = str(row.get("first_party_winner") or "").strip().lower()
                if label not in ("true", "false"):
                    reason = "blank first_party_winner" if not label else f"unknown label {label!r}"
                    report.skipped.append(SkippedRow(line, case_id, reason))
                    continue
                facts = html_to_text(row.get("facts") or "")
                if not facts:
                    report.skipped.append(SkippedRow(line, case_id, "no facts"))
                    continue
                cutoff = term_cutoff(row.get("term") or "", years=self.cutoff_years)
                if cutoff is None:
                    report.skipped.append(SkippedRow(line, case_id, "no usable term (no search cutoff)"))
                    continue
                first_line = ids.setdefault(case_id, line)
                if first_line != line:
                    raise DataError(
                        f"{path}:{line}: duplicate id {case_id!r} (also on line {first_line}): give every row its own "
                        "ID"
                    )
                first, second = row.get("first_party") or "", row.get("second_party") or ""
                data: dict[str, Any] = {
                    "facts": PartyAnonymizer(first, second).anonymize(facts),
                    "winning_party": "petitioner" if label == "true" else "respondent",
                    "first_party_winner": label == "true",
                    "cutoff": cutoff.isoformat(),
                    "term": str(row.get("term") or "").strip(),
                    "docket": str(row.get("docket") or "").strip(),
                    "id": case_id,
                }
                pending.append((data, first, second))
        if self.llm_scrub and pending:
            self._scrub(pending, report)
        examples = []
        for data, first, second in pending:
            if find_leaks(data["facts"], first, second):
                report.leaks += 1
                logger.warning("legal row %s: a party name is left in the facts", data["id"])
            examples.append(dspy.Example(**data).with_inputs("facts", "cutoff"))
        report.loaded = len(examples)
        self.last_load_report = report
        if report.rows and not examples and (limit is None or limit > 0):
            raise DataError(f"no usable rows in {path}: {report.summary()}")
        if report.skipped:
            logger.info("legal: %s", report.summary())
        return examples

    def _scrub(self, pending: list[tuple[dict[str, Any], str, str]], report: LegalLoadReport) -> None:
        from memento.execution.threads import run_parallel
        from memento.llm.lm import role_lm
        from memento.tasks.pii_scrub import PartyNameScrubber

        scrubber = PartyNameScrubber()
        lm = role_lm(self.roles, "lm")

        def one(item: tuple[dict[str, Any], str, str]) -> Any:
            data, first, second = item
            if lm is None:
                return scrubber(facts=data["facts"], first_party=first, second_party=second)
            with dspy.context(lm=lm):
                return scrubber(facts=data["facts"], first_party=first, second_party=second)

        for (data, _, _), result in zip(pending, run_parallel(one, pending, threads=self.threads), strict=True):
            if result.accepted:
                data["facts"] = result.facts
                report.scrubbed += 1

    def metric(
        self,
        example: dspy.Example,
        pred: dspy.Prediction,
        trace: Any = None,
        pred_name: str | None = None,
        pred_trace: Any = None,
    ) -> dspy.Prediction:
        """1.0 when the predicted winning party (normalised) is the one that won."""
        expected = example["winning_party"]
        raw = getattr(pred, "winning_party", None)
        got = normalize_party(raw)
        if got is None:
            feedback = f"The answer {raw!r} names no party; answer 'petitioner' or 'respondent'. The {expected} won."
            return dspy.Prediction(score=0.0, feedback=feedback)
        if got == expected:
            return dspy.Prediction(score=1.0, feedback=f"Correct: the {expected} won.")
        return dspy.Prediction(
            score=0.0, feedback=f"Wrong: predicted the {got}, but the Court ruled for the {expected}."
        )

    def make_metric(self, kind: str = "default", *, roles: Any | None = None) -> Any:
        """``default``: exact winning party; ``judge``: an LLM verdict judge under ``roles.judge_lm``."""
        from memento.metrics.verdict_judge import VerdictJudge

        if kind == "default":
            return self.metric
        if kind == "judge":
            return VerdictJudge(
                question_of=lambda ex: "Which party did the Supreme Court rule for: the petitioner or the respondent?",
                reference_of=lambda ex: f"the {ex['winning_party']} won",
                answer_of=lambda p: (
                    f"winning party: {getattr(p, 'winning_party', '')}; disposition: {getattr(p, 'disposition', '')}"
                    if getattr(p, "winning_party", None)
                    else ""
                ),
                roles=roles if roles is not None else self.roles,
            )
        raise ConfigError(f"task {self.name!r} has no metric {kind!r}; available: {', '.join(self.metric_kinds)}")
