"""Merging by meaning: which labelled rule pairs reach the canonicaliser's merge judge, and at what cost.

On ``tests/data/rule_pairs.jsonl`` (52 pairs: 20 paraphrases, 12 direct contradictions, 20 unrelated pairs, most
of them from the same domain), every distinct stored rule is put in its store and each pair's new rule is planned
as a candidate (:func:`memento.testing.judge_reach`): a pair *reaches the judge* when its stored rule is among the
items judged against its new one. Printed per embedder (the bundled MiniLM, and the hashing embedder of the base
install) and per selection rule:

* **now**: the ``max_judged`` (3) most similar stored items scoring at least the embedder's threshold (0.45 for
  MiniLM, 0.15 for hashing), the score being the larger of the embedder's cosine and the content words' character
  n-gram overlap, every live item a candidate;
* **before** (the baseline): the single best FTS5 match, judged only at cosine 0.8 or above.

Also the judge calls per new rule (mean and max) and the time to plan all 52 candidates.

Run: python bench/bench_canonical.py [--pairs tests/data/rule_pairs.jsonl]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from memento.memory.canonicalizer import Canonicalizer  # noqa: E402
from memento.memory.embedder import HashingEmbedder, SentenceTransformerEmbedder  # noqa: E402
from memento.testing import judge_reach, load_rule_pairs  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class _Before(Canonicalizer):
    """The previous selection rule: the FTS5 matches only, the best one judged when its cosine is at least 0.8."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.update(threshold=0.8, scan=0, max_judged=1)  # (the threshold judge_reach passes is replaced)
        super().__init__(*args, **kwargs)

    def nearest(self, text: str, pool: list[tuple[str, str]]) -> list[tuple[str, str, float]]:
        if not pool:
            return []
        vectors = self.embedder.embed([text] + [stored for _, stored in pool])
        cosines = vectors[1:] @ vectors[0]
        best = int(cosines.argmax())
        return [(pool[best][0], pool[best][1], float(cosines[best]))] if cosines[best] >= self.threshold else []


def _row(name: str, result: dict[str, Any], seconds: float) -> str:
    reached = {label: len(ids) for label, ids in result["reached"].items()}
    total = {label: reached[label] + len(result["missed"][label]) for label in reached}
    both = (reached["paraphrase"] + reached["contradiction"]) / (total["paraphrase"] + total["contradiction"])
    calls = result["calls"]
    return (
        f"| {name} | {both:.1%} ({reached['paraphrase'] + reached['contradiction']}/"
        f"{total['paraphrase'] + total['contradiction']}) | {reached['paraphrase']}/{total['paraphrase']} | "
        f"{reached['contradiction']}/{total['contradiction']} | {result['rates']['unrelated']:.0%} "
        f"({reached['unrelated']}/{total['unrelated']}) | {sum(calls) / len(calls):.2f} / {max(calls)} | "
        f"{seconds:.2f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=Path, default=ROOT / "tests" / "data" / "rule_pairs.jsonl")
    args = parser.parse_args()
    pairs = load_rule_pairs(args.pairs)
    print(f"{len(pairs)} labelled pairs from {args.pairs}")
    print(
        "| embedder, rule | para + contra reach | paraphrase | contradiction | unrelated reach "
        "| judge calls mean / max | plan s |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, embedder in (("MiniLM", SentenceTransformerEmbedder()), ("hashing", HashingEmbedder())):
        embedder.embed(["warm up"])  # the model loads before any timing
        for rule, cls in (("now", Canonicalizer), ("before", _Before)):
            started = time.perf_counter()
            result = judge_reach(pairs, embedder=embedder, canonicalizer=cls)
            seconds = time.perf_counter() - started
            print(_row(f"{name}, {rule} (threshold {result['threshold']:g})", result, seconds))


if __name__ == "__main__":
    main()
