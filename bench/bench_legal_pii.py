"""Party-name removal over the whole JUSTICE file: leak rates, skipped rows, cutoffs, speed.

For every row with a label the facts (HTML -> text) are anonymised by :class:`memento.tasks.pii.PartyAnonymizer`
and checked by :func:`memento.tasks.pii.find_leaks`, which does not use the anonymizer's parsing: a *full-name
leak* is the whole ``first_party``/``second_party`` string (case-insensitive, abbreviations may be written out)
outside a court's name; a *name leak* is any capitalised word of a party string outside the checker's stoplist
(any case but all-lowercase, outside court names). The baseline, measured in the same run, is the naive
procedure: case-insensitive replacement of the two full party strings only.

Beside the leak rates, :mod:`memento.tasks.pii_check` (also independent of the anonymizer) counts *garbled* rows (a
word of a multi-word party name left right beside its placeholder: "Great the respondent") and rows with an
*identifying fragment* (a party word inside a court's name, or misspelt by one letter; a capitalised word that
the corpus also writes in lowercase is an ordinary word).

Usage:
    python bench/bench_legal_pii.py --data /work/shared/data/justice/justice.csv
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
import time
from pathlib import Path


def naive(text: str, first: str, second: str) -> str:
    for name, label in ((first, "the petitioner"), (second, "the respondent")):
        name = " ".join(name.split())
        if name:
            text = re.sub(re.escape(name), label, text, flags=re.IGNORECASE)
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(__file__).resolve().parents[2] / "shared" / "data" / "justice" / "justice.csv"
    parser.add_argument("--data", type=Path, default=default)
    parser.add_argument("--show", type=int, default=40, help="print this many remaining leaks")
    args = parser.parse_args()
    if not args.data.exists():
        print(f"no such file: {args.data}", file=sys.stderr)
        return 2

    from memento.tasks._text import html_to_text
    from memento.tasks.legal import LegalTask
    from memento.tasks.pii import PartyAnonymizer, find_leaks
    from memento.tasks.pii_check import find_fragments, find_garbles

    with args.data.open(encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if (r.get("first_party_winner") or "").strip()]
    texts = [html_to_text(r["facts"]) for r in rows]
    vocabulary = {w for text in texts for w in re.findall(r"(?<![\w])[a-z]+(?![\w])", text)}

    results: dict[str, dict[str, float]] = {}
    examples_left: list[str] = []
    for method in ("raw text", "naive full-name replace", "PartyAnonymizer"):
        full_rows = name_rows = any_rows = full_hits = name_hits = garbled_rows = fragment_rows = 0
        started = time.perf_counter()
        outputs = []
        for row, text in zip(rows, texts, strict=True):
            if method == "raw text":
                out = text
            elif method == "naive full-name replace":
                out = naive(text, row["first_party"], row["second_party"])
            else:
                out = PartyAnonymizer(row["first_party"], row["second_party"]).anonymize(text)
            outputs.append(out)
        elapsed = time.perf_counter() - started
        for row, out in zip(rows, outputs, strict=True):
            leaks = find_leaks(out, row["first_party"], row["second_party"])
            full = [leak for leak in leaks if leak.kind == "full_name"]
            names = [leak for leak in leaks if leak.kind == "name"]
            full_rows += bool(full)
            name_rows += bool(names)
            any_rows += bool(leaks)
            full_hits += len(full)
            name_hits += len(names)
            garbles = find_garbles(out, row["first_party"], row["second_party"])
            fragments = find_fragments(out, row["first_party"], row["second_party"], vocabulary=vocabulary)
            garbled_rows += bool(garbles)
            fragment_rows += bool(fragments)
            if method == "PartyAnonymizer" and (garbles or fragments) and len(examples_left) < args.show:
                hit = (garbles or fragments)[0]
                examples_left.append(f"{row['ID']} {row['name']}: {hit.kind} {hit.word!r} in ...{hit.context!r}...")
            if method == "PartyAnonymizer" and leaks and len(examples_left) < args.show:
                context = " ".join(leaks[0].context.split())
                examples_left.append(f"{row['ID']} {row['name']}: {leaks[0].kind} {leaks[0].name!r} in ...{context}...")
        results[method] = {
            "full_rows": full_rows,
            "name_rows": name_rows,
            "any_rows": any_rows,
            "full_hits": full_hits,
            "name_hits": name_hits,
            "garbled_rows": garbled_rows,
            "fragment_rows": fragment_rows,
            "ms_per_row": 1000 * elapsed / len(rows),
        }

    task = LegalTask()
    started = time.perf_counter()
    examples = task.load(args.data)
    load_s = time.perf_counter() - started
    report = task.last_load_report
    assert report is not None
    with_cutoff = sum(1 for e in examples if e.get("cutoff"))
    forbidden = sum(1 for e in examples for key in ("disposition", "issue_area", "name") if key in e)

    n = len(rows)
    print(f"rows with a label: {n} (file rows {report.rows})")
    print()
    print(
        "| facts | rows with full-name leak | rows with name leak | rows with any leak | leak rate | name hits "
        "| garbled rows | garbling rate | rows with fragment | fragment rate | ms/row |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for method, r in results.items():
        print(
            f"| {method} | {r['full_rows']:.0f} | {r['name_rows']:.0f} | {r['any_rows']:.0f} | "
            f"{r['any_rows'] / n:.4f} | {r['name_hits']:.0f} | {r['garbled_rows']:.0f} | {r['garbled_rows'] / n:.4f} | "
            f"{r['fragment_rows']:.0f} | {r['fragment_rows'] / n:.4f} | {r['ms_per_row']:.2f} |"
        )
    print()
    print(f"LegalTask.load over the whole file: {load_s:.1f} s; {report.summary()}")
    print(f"skipped: {report.reasons}")
    print(f"examples with a cutoff: {with_cutoff}/{len(examples)}")
    print(f"examples carrying disposition/issue_area/name: {forbidden}")
    print(f"leaks after loading: {report.leaks}")
    for line in examples_left:
        print("left:", line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
