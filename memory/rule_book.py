"""M2/M3 rule books: procedural rules with support and contradiction counts (MEMENTO §3.4-3.5).

One class serves two stores of the same database: ``decomposition`` (M2: "When <pattern in the root or
inputs>, add a sub-question that covers <pattern>") and ``web_action`` (M3: query formulation, URL selection,
scraping constraints). Each rule keeps support and contradiction counts, a status (``active``;
``downweighted`` once contradictions exceed support; ``retired``), its created/updated batch and provenance
(task ids). Counts are numbers of independent runs (the trainer aggregates per batch). A down-weighted rule is
not retracted: selection still considers it at a quarter of its weight, it is shown with its counts, the
distillers see it, and it turns active again once its support catches up. Retirement is explicit
(:meth:`RuleBook.retire`, logged). Under the budgeted profile :meth:`RuleBook.select` packs the best rules by
weight (relevance to the task as a bonus) into a token budget.

Example:
    >>> import tempfile
    >>> from memento.memory.sqlite_store import SQLiteStore
    >>> book = RuleBook(SQLiteStore(tempfile.mkdtemp()), "web_action")
    >>> rule = book.add("Quote the exact title when searching for a paper.", provenance=["t1"], batch=1)
    >>> book.reinforce(rule.id, support=2, batch=1).support
    2
"""

from __future__ import annotations

import logging
from typing import Literal

from memento.core.dating import DateFilter
from memento.core.types import EvidenceRecord, Rule, RuleStatus, new_id
from memento.memory.sqlite_store import SQLiteStore, Transaction, estimate_tokens, index_columns, rule_weight

__all__ = ["RuleBook", "RuleStats"]

logger = logging.getLogger(__name__)

StoreName = Literal["decomposition", "web_action"]


class RuleStats(dict[str, int]):
    """Aggregate counts of a rule book: ``rules`` (not retired), ``active``, ``downweighted``, ``retired``,
    ``total_support``, ``total_contradiction``, ``rules_contradicted``, ``chars``."""


def _status(rule: Rule) -> RuleStatus:
    if rule.status == "retired":
        return "retired"
    return "downweighted" if rule.contradiction > rule.support else "active"


class RuleBook:
    """A rule store (M2 ``decomposition`` or M3 ``web_action``) inside a memory database.

    Args:
        db: The memory database.
        store: ``"decomposition"`` or ``"web_action"``.
    """

    def __init__(self, db: SQLiteStore, store: StoreName) -> None:
        if store not in ("decomposition", "web_action"):
            raise ValueError(f"unknown rule store {store!r}")
        self.db = db
        self.store = store

    # -- reads -------------------------------------------------------------------------------------------
    def all(self, *, include_retired: bool = True) -> list[Rule]:
        """Every rule, ordered by id."""
        rules = [Rule.model_validate(row["data"]) for row in self.db.items(self.store)]
        return rules if include_retired else [r for r in rules if r.status != "retired"]

    def __len__(self) -> int:
        return self.db.count(self.store, statuses=("active", "downweighted"))

    def get(self, rule_id: str) -> Rule | None:
        """One rule by id."""
        rows = self.db.query("SELECT data FROM items WHERE store=? AND id=?", (self.store, rule_id))
        return Rule.model_validate_json(rows[0][0]) if rows else None

    def live(self, *, exclude_task_id: str | None = None, dates: DateFilter | None = None) -> list[Rule]:
        """Every live rule (active or down-weighted), heaviest first (then by id): what the ``paper`` profile injects
        whole. ``exclude_task_id`` drops rules a task's own run backs; ``dates`` keeps those a task may see."""
        rows = self.db.items(self.store, dates=dates)
        rules = [Rule.model_validate(row["data"]) for row in rows]
        rules = [r for r in rules if r.status != "retired" and exclude_task_id not in r.provenance]
        return sorted(rules, key=lambda r: (-self.weight(r), r.id))

    @staticmethod
    def weight(rule: Rule) -> float:
        """The ranking weight of a rule (see :func:`memento.memory.sqlite_store.rule_weight`)."""
        return rule_weight(rule.support, rule.contradiction, rule.status)

    def select(
        self,
        task_text: str,
        *,
        budget_tokens: int,
        exclude_task_id: str | None = None,
        pool: int = 64,
        relevance_bonus: float = 3.0,
        dates: DateFilter | None = None,
    ) -> list[Rule]:
        """The best rules for a task that fit in ``budget_tokens``: heaviest first, task-relevant ones boosted.

        Candidates are the ``pool`` heaviest live rules (active or down-weighted) and the ``pool`` best lexical
        matches (FTS5 BM25), so the cost does not grow with the book; only rules ``dates`` lets the task see
        compete. A rule's score is its weight plus ``relevance_bonus`` times its BM25 score relative to the best
        match (the best match gains the whole bonus).
        """
        candidates: dict[str, tuple[Rule, float]] = {}
        live = ("active", "downweighted")
        hits = self.db.fts_search(
            self.store,
            task_text,
            columns=("text",),
            statuses=live,
            limit=pool,
            exclude_task_id=exclude_task_id,
            dates=dates,
        )
        best = min((rank for _data, rank in hits), default=0.0)  # FTS5 ranks are negative: lower is better
        for data, rank in hits:
            rule = Rule.model_validate(data)
            relevance = rank / best if best < 0 else 0.0
            candidates[rule.id] = (rule, self.weight(rule) + relevance_bonus * relevance)
        top = self.db.top_by_weight(self.store, statuses=live, limit=pool, exclude_task_id=exclude_task_id, dates=dates)
        for data in top:
            rule = Rule.model_validate(data)
            candidates.setdefault(rule.id, (rule, self.weight(rule)))
        ranked = sorted(candidates.values(), key=lambda pair: (-pair[1], pair[0].id))
        chosen: list[Rule] = []
        used = 0
        for rule, _score in ranked:
            cost = estimate_tokens(self.render_rule(rule)) + 1
            if used + cost > budget_tokens:
                continue
            chosen.append(rule)
            used += cost
        return chosen

    @staticmethod
    def render_rule(rule: Rule) -> str:
        """One prompt line for a rule, with its evidence counts (and its status when down-weighted)."""
        mark = ", down-weighted" if rule.status == "downweighted" else ""
        return f"- {rule.text} (support {rule.support}, contradicted {rule.contradiction}{mark})"

    def stats(self) -> RuleStats:
        """Counts for reports: rules, statuses, total support/contradiction, rules contradicted, characters."""
        rules = self.all()
        live = [r for r in rules if r.status != "retired"]
        return RuleStats(
            rules=len(live),
            active=sum(r.status == "active" for r in rules),
            downweighted=sum(r.status == "downweighted" for r in rules),
            retired=sum(r.status == "retired" for r in rules),
            total_support=sum(r.support for r in rules),
            total_contradiction=sum(r.contradiction for r in rules),
            rules_contradicted=sum(r.contradiction > 0 for r in rules),
            chars=sum(len(r.text) for r in live),
        )

    # -- writes ------------------------------------------------------------------------------------------
    def put(self, rule: Rule, *, tx: Transaction | None = None) -> Rule:
        """Insert or replace a rule (its status recomputed from its counts unless retired)."""
        rule = rule.model_copy(update={"status": _status(rule), "store": self.store})
        data = rule.model_dump(mode="json")
        with self.db.write(tx, batch=rule.updated_batch) as t:
            t.put(self.store, rule.id, data, **index_columns(self.store, data))
        return rule

    def add(
        self,
        text: str,
        *,
        provenance: list[str] | None = None,
        batch: int = 0,
        support: int = 0,
        contradiction: int = 0,
        evidence: EvidenceRecord | None = None,
        tx: Transaction | None = None,
    ) -> Rule:
        """Store a new active rule (``evidence``: the pages and runs behind it, which date it)."""
        rule = Rule(
            id=new_id("r-"),
            store=self.store,
            text=text.strip(),
            support=support,
            contradiction=contradiction,
            created_batch=batch,
            updated_batch=batch,
            provenance=sorted(set(provenance or [])),
            evidence=evidence or EvidenceRecord(),
        )
        return self.put(rule, tx=tx)

    def reinforce(
        self,
        rule_id: str,
        *,
        support: int = 0,
        contradiction: int = 0,
        task_ids: list[str] | None = None,
        batch: int = 0,
        evidence: EvidenceRecord | None = None,
        tx: Transaction | None = None,
    ) -> Rule:
        """Add support and/or contradiction to a rule (KeyError when unknown); ``evidence`` (the voting runs and
        their pages) joins the rule's, so its date is the newest evidence that shaped its counts."""
        with self.db.write(tx, batch=batch) as t:
            data = t.existing(self.store, rule_id)
            rule = Rule.model_validate(data)
            rule = rule.model_copy(
                update={
                    "support": rule.support + support,
                    "contradiction": rule.contradiction + contradiction,
                    "updated_batch": batch,
                    "provenance": sorted(set(rule.provenance) | set(task_ids or [])),
                    "evidence": rule.evidence.merged(evidence),
                }
            )
            return self.put(rule, tx=t)

    def retire(self, rule_id: str, *, batch: int = 0, reason: str = "", tx: Transaction | None = None) -> Rule:
        """Retire a rule: it stays in the book (and the change log) but is never injected again. Logged."""
        with self.db.write(tx, batch=batch) as t:
            data = t.existing(self.store, rule_id)
            rule = Rule.model_validate(data).model_copy(update={"status": "retired", "updated_batch": batch})
            logger.info(
                "%s rule %s retired in batch %d (support %d, contradiction %d): %s",
                self.store,
                rule_id,
                batch,
                rule.support,
                rule.contradiction,
                reason or "no reason given",
            )
            return self.put(rule, tx=t)

    def update_text(self, rule_id: str, text: str, *, batch: int = 0, tx: Transaction | None = None) -> Rule:
        """Rewrite a rule's text (a canonical merge), keeping its counts."""
        with self.db.write(tx, batch=batch) as t:
            data = t.existing(self.store, rule_id)
            rule = Rule.model_validate(data).model_copy(update={"text": text.strip(), "updated_batch": batch})
            return self.put(rule, tx=t)
