"""Votes on stored rules, one per run and rule: a run's numbered operations become votes on the rules it was
shown and ``add`` candidates backed by that run (:func:`split_ops`); the batch's votes are applied as numbers of
runs (:func:`apply_votes`): support and contradiction grow, the voting runs' evidence joins the rule's, and a rule
enough runs propose removing is retired.

Example:
    >>> from memento.optimize.trainer_records import RuleVote
    >>> from memento.optimize.rule_votes import split_ops
    >>> votes, adds = split_ops([{"op": "add", "text": "Prefer primary sources"}], [], "ex-1", "evidence")
    >>> len(votes), adds[0].text
    (0, 'Prefer primary sources')
"""

from __future__ import annotations

from typing import Any

from memento.core.types import EvidenceRecord
from memento.memory.canonicalizer import Candidate
from memento.memory.rule_book import RuleBook
from memento.optimize.trainer_records import RuleVote

__all__ = ["numbered_rules", "split_ops", "apply_votes"]


def numbered_rules(rules: list[Any]) -> str:
    return "\n".join(f"{i}. {RuleBook.render_rule(r)[2:]}" for i, r in enumerate(rules, 1))


def split_ops(
    ops: list[Any], shown: list[Any], run_id: str, evidence: str, backing: EvidenceRecord | None = None
) -> tuple[list[RuleVote], list[Candidate]]:
    """One run's numbered ops -> votes on shown rules, plus ``add`` candidates backed by that run."""
    votes: list[RuleVote] = []
    adds: list[Candidate] = []
    for item in ops:
        data = item if isinstance(item, dict) else item.model_dump()
        op = data.get("op")
        if op == "add":
            if str(data.get("text", "")).strip():
                adds.append(
                    Candidate(
                        text=str(data["text"]),
                        provenance=[run_id],
                        evidence=evidence,
                        backing=backing or EvidenceRecord(),
                    )
                )
            continue
        number = data.get("rule")
        if isinstance(number, int) and 1 <= number <= len(shown) and op in ("reinforce", "contradict", "remove"):
            votes.append(RuleVote(rule_id=shown[number - 1].id, run_id=run_id, op=op))
    return votes, adds


def apply_votes(
    book: RuleBook,
    votes: list[RuleVote],
    batch: int,
    tx: Any,
    backings: dict[str, EvidenceRecord],
    *,
    retire_min_runs: int,
) -> int:
    """Apply the batch's votes: support and contradiction grow by numbers of runs, the voting runs' evidence
    joins each rule's (``backings``: run id -> its evidence); a rule is retired when at least ``retire_min_runs``
    runs propose removing it and its contradictions then exceed its support. Returns the rules retired."""
    tally: dict[str, dict[str, set[str]]] = {}
    for vote in votes:
        ops = tally.setdefault(vote.rule_id, {"reinforce": set(), "contradict": set(), "remove": set()})
        ops[vote.op].add(vote.run_id)
    retired = 0
    for rule_id, ops in tally.items():
        if tx.get(book.store, rule_id) is None:
            continue
        against = ops["contradict"] | ops["remove"]
        support = ops["reinforce"] - against  # a run voting both ways counts for neither
        against = against - ops["reinforce"]
        evidence = EvidenceRecord()
        for run_id in sorted(support | against):
            evidence = evidence.merged(backings.get(run_id))
        rule = book.reinforce(
            rule_id,
            support=len(support),
            contradiction=len(against),
            task_ids=sorted(support | against),
            batch=batch,
            evidence=evidence,
            tx=tx,
        )
        removers = ops["remove"] - ops["reinforce"]
        if len(removers) >= retire_min_runs and rule.contradiction > rule.support:
            book.retire(
                rule_id,
                batch=batch,
                reason=f"{len(removers)} runs proposed removal ({', '.join(sorted(removers))})",
                tx=tx,
            )
            retired += 1
    return retired
