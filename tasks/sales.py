"""The ``sales`` task (SDR-style): a seller, its products and a customer -> value propositions for that customer.

Data format (JSONL, one seller-customer pair per line)::

    {"id": "acme-globex",                                           # optional
     "seller": "Acme Analytics, a data-platform vendor",            # string or object
     "products": ["Acme Stream: real-time ingestion", "..."],       # string, list of strings or objects
     "customer": "Globex, a mid-size logistics company expanding into cold-chain shipping",
     "value_propositions": [{"pain_point": "...", "mechanism": "...", "evidence": "..."}],
     "published": "2024-05-17"}                                     # the story's publication date ("date" works too)

The search cutoff is six months before the story's publication date (MEMENTO §4.1), so the agent cannot read the
story or what followed it. A row without a publication date is refused (one line naming file and line) unless a
cutoff is set: a ``"cutoff": "YYYY-MM-DD"`` field in the row, or the task's ``cutoff`` option
(``get_task("sales", cutoff="2024-01-01")``) for every row without a date. A row's own ``cutoff`` wins over one
derived from its date. Objects in ``seller``/``products``/``customer`` are rendered as readable text for the model.

Metric: the coverage judge (MEMENTO Appendix G): each ground-truth proposition scored 0-5 by the ``judge_lm``,
normalised ``sum / (5 * |G|)``; unusable judge replies are recorded judge errors.

Example:
    >>> from memento.tasks import get_task
    >>> get_task("sales").output_fields
    ['value_propositions']
"""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path
from typing import Any

import dspy
from pydantic import BaseModel, Field

from memento.core.errors import ConfigError, DataError
from memento.tasks._jsonl import jsonl_rows
from memento.tasks.task import Task, register_task

__all__ = ["ValueProposition", "ProposeValuePropositions", "SalesTask", "months_before"]


class ValueProposition(BaseModel):
    """One value proposition: the customer's pain point, how the product relieves it, and the evidence."""

    pain_point: str = Field(description="the specific problem or need of this customer")
    mechanism: str = Field(description="how a specific product of the seller addresses it")
    evidence: str = Field(default="", description="facts about the customer that show the pain point is real")


class ProposeValuePropositions(dspy.Signature):
    """You are a sales development representative preparing outreach to one customer. From what is known about
    the customer (its business, recent news, initiatives, problems) identify the concrete pain points the
    seller's products can relieve, and write one value proposition per pain point: the pain point, the mechanism
    by which a specific product addresses it, and the evidence about this customer that shows the need is real.
    Prefer few specific, well-evidenced propositions over generic benefits that would apply to any customer."""

    seller: str = dspy.InputField(desc="the selling company")
    products: str = dspy.InputField(desc="the seller's products and what they do")
    customer: str = dspy.InputField(desc="the customer company and what is known about it")
    value_propositions: list[ValueProposition] = dspy.OutputField(desc="the value propositions, best first")


def months_before(day: dt.date, months: int) -> dt.date:
    """``day`` minus ``months`` calendar months (the day clamped to the month's length)."""
    import calendar

    index = day.year * 12 + (day.month - 1) - months
    year, month = divmod(index, 12)
    month += 1
    return dt.date(year, month, min(day.day, calendar.monthrange(year, month)[1]))


def _iso_date(value: Any) -> str:
    """A date or an ISO date string (a timestamp keeps its date) as ``YYYY-MM-DD``; ``ValueError`` otherwise."""
    if isinstance(value, dt.date):
        return value.isoformat()[:10]
    return dt.date.fromisoformat(str(value).strip()[:10]).isoformat()


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        return "\n".join(f"- {_as_text(v)}" for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_as_text(v)}" for k, v in value.items())
    return str(value)


def _proposition(value: Any, where: str) -> dict[str, str]:
    if isinstance(value, str):
        return {"pain_point": value, "mechanism": "", "evidence": ""}
    if not isinstance(value, dict) or not value.get("pain_point"):
        raise DataError(f"{where}: a value proposition needs at least a pain_point")
    return {key: str(value.get(key, "") or "") for key in ("pain_point", "mechanism", "evidence")}


@register_task
class SalesTask(Task):
    """Value propositions for a seller-customer pair, scored by the 0-5 coverage judge.

    Args:
        cutoff_months: months before the story's publication date where the search cutoff lies (6 in MEMENTO).
        cutoff: the search cutoff (``YYYY-MM-DD``) of rows that give no publication date and no cutoff of their own;
            without it such a row is refused.
        roles: LM roles; the judge runs under ``roles.judge_lm`` (DSPy's default LM without roles).
    """

    name = "sales"
    signature = ProposeValuePropositions
    metric_kinds = ("default", "coverage")

    def __init__(
        self, *, cutoff_months: int = 6, cutoff: str | dt.date | None = None, roles: Any | None = None
    ) -> None:
        self.cutoff_months = cutoff_months
        try:
            self.default_cutoff = _iso_date(cutoff) if cutoff not in (None, "") else None
        except ValueError:
            raise ConfigError(f"the sales cutoff must be a date YYYY-MM-DD, not {cutoff!r}") from None
        self.roles = roles
        self._judge: Any = None
        self._lock = threading.Lock()

    def load(self, path: str | Path, *, limit: int | None = None) -> list[dspy.Example]:
        """Read JSONL rows (format in the module docstring) into examples with inputs seller, products, customer.

        Raises:
            DataError: a malformed row (the message names file and line).
        """
        examples: list[dspy.Example] = []
        for where, row in jsonl_rows(
            path, kind="sales", required=("seller", "products", "customer", "value_propositions")
        ):
            seller, products, customer = row["seller"], row["products"], row["customer"]
            propositions = row["value_propositions"]
            if not isinstance(propositions, list) or not propositions:
                raise DataError(f"{where}: value_propositions must be a non-empty list")
            data: dict[str, Any] = {
                "seller": _as_text(seller),
                "products": _as_text(products),
                "customer": _as_text(customer),
                "value_propositions": [_proposition(v, where) for v in propositions],
            }
            if "id" in row:
                data["id"] = row["id"]
            data.update(self._dates(row, where))
            examples.append(dspy.Example(**data).with_inputs("seller", "products", "customer", "cutoff"))
            if limit is not None and len(examples) >= limit:
                break
        return examples

    def _dates(self, row: dict[str, Any], where: str) -> dict[str, str]:
        """``date`` (the story's publication date, when given) and ``cutoff``: the row's own cutoff, else six months
        before the publication date, else the task's ``cutoff`` option; none of them is one line."""
        out: dict[str, str] = {}
        for key in ("published", "date"):
            if row.get(key) not in (None, ""):
                try:
                    out["date"] = _iso_date(row[key])
                except ValueError:
                    raise DataError(f"{where}: {key} {row[key]!r} is not a date YYYY-MM-DD") from None
                break
        if row.get("cutoff") not in (None, ""):
            try:
                out["cutoff"] = _iso_date(row["cutoff"])
            except ValueError:
                raise DataError(f"{where}: cutoff {row['cutoff']!r} is not a date YYYY-MM-DD") from None
        elif "date" in out:
            out["cutoff"] = months_before(dt.date.fromisoformat(out["date"]), self.cutoff_months).isoformat()
        elif self.default_cutoff is not None:
            out["cutoff"] = self.default_cutoff
        else:
            raise DataError(
                f"{where}: no publication date: the search cutoff is {self.cutoff_months} months before the story's "
                'date; add "published": "YYYY-MM-DD" to the row, or set a cutoff ("cutoff" in the row, or the task\'s '
                "cutoff option)"
            )
        return out

    def task_text(self, inputs: dspy.Example | dict[str, Any]) -> str:
        """Every model-visible input: the seller, its products and the customer."""
        return f"Seller: {inputs['seller']}\nProducts:\n{inputs['products']}\nCustomer: {inputs['customer']}"

    def retrieval_key(self, inputs: dspy.Example | dict[str, Any]) -> str:
        """Seller and customer only (the key banks were built with before ``task_text`` carried the products)."""
        return f"Value propositions of {inputs['seller']} for the customer {inputs['customer']}"

    def judge(self) -> Any:
        """The (shared, memoising) coverage judge of this task instance."""
        from memento.metrics.coverage_judge import CoverageJudge

        with self._lock:
            if self._judge is None:
                self._judge = CoverageJudge(roles=self.roles)
            return self._judge

    def metric(
        self,
        example: dspy.Example,
        pred: dspy.Prediction,
        trace: Any = None,
        pred_name: str | None = None,
        pred_trace: Any = None,
    ) -> dspy.Prediction:
        """Normalised coverage ``sum(s) / (5 * |G|)`` of the ground-truth propositions (judge errors counted)."""
        return self.judge()(example, pred, trace, pred_name, pred_trace)

    def make_metric(self, kind: str = "default", *, roles: Any | None = None) -> Any:
        """``default``/``coverage``: a coverage judge running under ``roles.judge_lm``."""
        from memento.metrics.coverage_judge import CoverageJudge

        if kind in ("default", "coverage"):
            return CoverageJudge(roles=roles if roles is not None else self.roles)
        raise ConfigError(f"task {self.name!r} has no metric {kind!r}; available: {', '.join(self.metric_kinds)}")
