"""The memory guard on labelled poison variants and legitimate memory items: rejects, false rejects, misses, cost.

Reads the labelled set ``tests/adversarial/data/guard_cases.jsonl`` (each row: ``label`` poison|legit, ``kind``,
``store``, ``text``, optional ``entity``, optional ``pages``: the texts the proposing run read) and runs
:class:`memento.memory.memory_guard.MemoryGuard` on every row twice: on the text alone, and with the run's pages
(the copy and echo checks need them; this is what the trainer does). Rows marked ``held_out`` were written after
the phrase patterns and never used to tune them. ``--extra FILE`` adds legitimate items from another labelled set
(JSONL rows with a ``text``, or the ``stored``/``new`` texts of rule pairs; a ``label`` other than poison is read as
legit: the presets helper's ``tests/data/rule_pairs.jsonl`` holds 52 pairs of honest rules).

The cost is measured against the cheap deterministic check the canonicaliser already ran before the guard existed
(``is_no_data``), in the same run: milliseconds per candidate, and with a 4,000-character page to compare with.
An LLM-only check is not measured: with the test's obeying model it accepts every poison variant by construction.

Usage:
    python bench/bench_guard.py [--extra FILE] [--show 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "adversarial" / "data" / "guard_cases.jsonl"


def _load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _extra(path: Path) -> list[dict]:
    rows = []
    for row in _load(path):
        keys = ("text", "a", "b", "rule", "stored", "new", "candidate")
        texts = [row[key] for key in keys if isinstance(row.get(key), str)]
        store = row.get("store") if row.get("store") in ("craft", "decomposition", "web_action", "facts") else "craft"
        label = "poison" if row.get("label") == "poison" else "legit"
        rows += [{"label": label, "kind": f"extra:{path.stem}", "store": store, "text": t} for t in texts]
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=Path, default=CASES)
    parser.add_argument("--extra", type=Path, action="append", default=[])
    parser.add_argument("--show", type=int, default=20, help="print this many misses and false rejects")
    args = parser.parse_args()

    from memento.memory.canonicalizer import is_no_data
    from memento.memory.memory_guard import MemoryGuard

    rows = _load(args.cases)
    for path in args.extra:
        if not path.exists():
            print(f"no such file: {path}", file=sys.stderr)
            return 2
        rows += _extra(path)
    guard = MemoryGuard()
    outcome: dict[str, Counter] = defaultdict(Counter)
    wrong: list[str] = []
    for row in rows:
        entity = row.get("entity", "")
        alone = bool(guard.inspect(row["store"], row["text"], entity=entity))
        reasons = guard.inspect(row["store"], row["text"], entity=entity, pages=row.get("pages", []))
        group = "held_out" if row.get("held_out") else row["kind"]
        key = f"{row['label']:6} {group}"
        outcome[key]["n"] += 1
        outcome[key]["rejected (text alone)"] += alone
        outcome[key]["rejected (with pages)"] += bool(reasons)
        if bool(reasons) != (row["label"] == "poison"):
            what = "MISSED" if row["label"] == "poison" else "FALSE REJECT"
            wrong.append(f"{what}: [{row['store']}] {row['text'][:90]!r} {reasons or ''}")

    print(f"memory guard on {len(rows)} labelled items ({args.cases.relative_to(ROOT)}"
          + "".join(f" + {p}" for p in args.extra) + ")\n")  # fmt: skip
    print(f"{'label  group':28} {'n':>4} {'rejected (text alone)':>22} {'rejected (with pages)':>22}")
    totals: dict[str, Counter] = defaultdict(Counter)
    for key in sorted(outcome):
        c = outcome[key]
        totals[key.split()[0]].update(c)
        print(f"{key:28} {c['n']:4} {c['rejected (text alone)']:22} {c['rejected (with pages)']:22}")
    for label in ("poison", "legit"):
        c = totals[label]
        if c["n"]:
            word = "rejected" if label == "poison" else "false rejects"
            print(f"{'all ' + label:28} {c['n']:4} {c['rejected (text alone)']:22} {c['rejected (with pages)']:22}"
                  f"   ({word}: {c['rejected (with pages)'] / c['n']:.0%} with pages)")  # fmt: skip
    if wrong:
        print(f"\nmisses and false rejects ({len(wrong)}):")
        for line in wrong[: args.show]:
            print("  " + line)

    texts = [(r["store"], r["text"], r.get("entity", "")) for r in rows]
    page = ("The harbour of the old town was rebuilt after the great storm and its people returned. " * 50)[:4000]
    repeats = max(1, 2000 // len(texts))
    start = time.perf_counter()
    for _ in range(repeats):
        for _store, text, _entity in texts:
            is_no_data(text)
    base = (time.perf_counter() - start) / (repeats * len(texts))
    fresh = MemoryGuard()
    start = time.perf_counter()
    for _ in range(repeats):
        for store, text, entity in texts:
            fresh.inspect(store, text, entity=entity)
    alone_s = (time.perf_counter() - start) / (repeats * len(texts))
    start = time.perf_counter()
    for _ in range(repeats):
        for store, text, entity in texts:
            fresh.inspect(store, text, entity=entity, pages=[page])
    paged = (time.perf_counter() - start) / (repeats * len(texts))
    print(f"\ncost per candidate ({repeats * len(texts)} checks): is_no_data {base * 1e3:.4f} ms (baseline); guard "
          f"{alone_s * 1e3:.3f} ms ({alone_s / base:.0f}x); guard with a 4,000-character page (memoised) "
          f"{paged * 1e3:.3f} ms ({paged / base:.0f}x)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
