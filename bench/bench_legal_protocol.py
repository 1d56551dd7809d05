"""The legal protocol (``memento data legal``) on the real JUSTICE file: counts per stage, and its cost over its agent.

A local OpenAI-compatible server (``memento.testing.OpenAICompatServer``, 127.0.0.1) plays the leakage agent with
scripted replies: search the first words of the facts, read the first hit, report that no page states the decision.
The web is an offline corpus (default: the wiki_vital summaries of ``shared/data``, 10,033 undated pages). Printed:

* the protocol's counts per stage on the file (rows, terms of 2010 or later, usable, kept, dropped, split sizes) and
  whether ``train.csv``/``test.csv`` equal the split compare makes of ``kept.csv`` (``split_examples`` on the
  loader's examples, as ``memento compare --data kept.csv --n-train 60 --n-test 120 --seed 42`` does);
* **baseline**: the same agent run over the same cases bare (``LeakageProbe`` calls in the same thread pool, no
  journal, no files), then **protocol**: ``LegalProtocol.run`` into a fresh directory; the ratio of wall times is the
  protocol's own overhead (candidate and kept files, per-case journal lines with fsync, the split);
* LM requests and seconds per case of each.

With a scripted agent nothing is dropped: the drop rate needs a real model and the real web (not measurable here).

Run: python bench/bench_legal_protocol.py [--data .../justice.csv] [--corpus FILE] [--threads 2] [--limit ROWS]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402

from memento.core.config import load_settings  # noqa: E402
from memento.execution.threads import run_parallel  # noqa: E402
from memento.optimize.compare_data import split_examples  # noqa: E402
from memento.optimize.legal_protocol import LegalProtocol  # noqa: E402
from memento.programs.leakage_probe import LeakageProbe  # noqa: E402
from memento.tasks.legal import LegalTask  # noqa: E402
from memento.testing import OpenAICompatServer, ScriptedEngine, script_search_read_finish  # noqa: E402
from memento.web.factory import web_tools_factory  # noqa: E402

SHARED = Path("/work/shared/data")


def _engine() -> ScriptedEngine:
    engine = ScriptedEngine()
    script_search_read_finish(engine, lambda c: " ".join(c.inputs.get("facts", "").split()[:8]))
    engine.when(predicate=lambda c: "found" in c.output_fields, found=False, winning_party="unknown", quote="")
    return engine


def _ids(path: Path) -> list[str]:
    import csv

    with path.open(newline="", encoding="utf-8") as handle:
        return [row["ID"] for row in csv.DictReader(handle)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED / "justice" / "justice.csv")
    parser.add_argument("--corpus", type=Path, default=SHARED / "wiki_vital" / "summaries_en-us.json")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--limit", type=int, default=None, help="read only the first ROWS rows")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, OpenAICompatServer(_engine()) as server:
        work = Path(tmp)
        settings = load_settings(flags={"web": {"corpus": str(args.corpus), "cache_dir": str(work / "web")}})
        web = web_tools_factory(settings)
        lm = dspy.LM("openai/scripted", api_base=server.api_base, api_key="bench", cache=False)
        dspy.configure(lm=lm)
        web(None, None).search("warm up the corpus index")  # built or opened once, outside both timings
        protocol = LegalProtocol(probe=LeakageProbe(web=web, max_steps=10), threads=args.threads)
        plan = protocol.prepare(args.data, work / "plan", limit=args.limit)  # the cases, for the baseline
        cases = plan.examples
        probe = LeakageProbe(web=web, max_steps=10)
        sent = server.chat_requests
        started = time.perf_counter()
        run_parallel(lambda ex: probe(facts=ex.facts, cutoff=ex.cutoff), cases, threads=args.threads)
        bare, bare_requests = time.perf_counter() - started, server.chat_requests - sent
        sent = server.chat_requests
        started = time.perf_counter()
        report = protocol.run(args.data, work / "out", limit=args.limit)
        full, full_requests = time.perf_counter() - started, server.chat_requests - sent
        same: bool | str = report.split_error or ""
        if not report.split_error:
            kept = LegalTask().load(work / "out" / "kept.csv")
            train, test = split_examples(kept, n_train=60, n_test=120, seed=42)
            same = _ids(work / "out" / "train.csv") == [ex.id for ex in train]
            same = same and _ids(work / "out" / "test.csv") == [ex.id for ex in test]
    c = report.counts
    print(f"data: {args.data}  corpus: {args.corpus}  threads: {args.threads}")
    print(f"rows {c['rows']}, no term {c['no_term']}, term >= 2010 {c['recent']}, usable {c['loaded']} "
          f"(skipped: {report.skipped}), kept {c['kept']}, dropped {c['dropped']}, failed {c['failed']}")  # fmt: skip
    print(f"split: train {len(report.train)}, test {len(report.test)}; equal to compare's split of kept.csv: {same}")
    n = max(1, len(cases))
    print(f"baseline (bare agent): {bare:.1f} s, {bare_requests} LM requests, {bare / n * 1000:.1f} ms per case")
    print(f"protocol:              {full:.1f} s, {full_requests} LM requests, {full / n * 1000:.1f} ms per case")
    print(f"ratio protocol / bare agent: {full / bare:.2f}" if cases else "ratio: no case to screen")


if __name__ == "__main__":
    main()
