"""Regenerate the shipped multi-hop sample (``examples/multihop/``) from the full evaluation data.

Picks 4 questions from each of the three sources (HotpotQA dev, HotpotQA train, MuSiQue train) with a fixed
seed, keeps every corpus paragraph that belongs to those questions (their gold paragraphs and their own
distractors), and adds random distractors from the rest of the corpus up to ``--size`` paragraphs.

Usage:
    python examples/make_sample.py [--data /work/shared/data/multihop] [--out examples/multihop] [--size 300]
"""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from pathlib import Path

QUESTION_FIELDS = ("id", "source", "question", "answers", "type", "level", "gold_titles", "decomposition")


def make_sample(data: Path, out: Path, *, per_source: int = 4, size: int = 300, seed: int = 42) -> tuple[int, int]:
    """Write ``corpus.jsonl`` and ``questions.jsonl`` under ``out``; return (paragraphs, questions)."""
    rng = random.Random(seed)
    questions = [json.loads(line) for line in (data / "questions.jsonl").open(encoding="utf-8") if line.strip()]
    corpus = [json.loads(line) for line in (data / "corpus.jsonl").open(encoding="utf-8") if line.strip()]
    by_source: dict[str, list[dict]] = defaultdict(list)
    for q in questions:
        by_source[q["source"]].append(q)
    chosen = [q for source in sorted(by_source) for q in rng.sample(by_source[source], per_source)]
    wanted = {d["title"] for q in chosen for d in q["docs"]} | {t for q in chosen for t in q["gold_titles"]}
    picked = [d for d in corpus if d["title"] in wanted]
    rest = [d for d in corpus if d["title"] not in wanted]
    picked += rng.sample(rest, max(0, size - len(picked)))
    picked.sort(key=lambda d: d["doc_id"])
    out.mkdir(parents=True, exist_ok=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        for d in picked:
            fh.write(json.dumps({"doc_id": d["doc_id"], "title": d["title"], "text": d["text"]}, ensure_ascii=False))
            fh.write("\n")
    with (out / "questions.jsonl").open("w", encoding="utf-8") as fh:
        for q in chosen:
            fh.write(json.dumps({k: q[k] for k in QUESTION_FIELDS if k in q}, ensure_ascii=False) + "\n")
    return len(picked), len(chosen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("/work/shared/data/multihop"))
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "multihop")
    parser.add_argument("--size", type=int, default=300)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    n_docs, n_questions = make_sample(args.data, args.out, size=args.size, seed=args.seed)
    print(f"wrote {n_docs} paragraphs and {n_questions} questions to {args.out}")


if __name__ == "__main__":
    main()
