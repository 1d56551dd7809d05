"""Adaptive Exploration Tree: parallel speed-up against the tree's critical path, and framework overhead per LM call.

A scripted LM (memento.testing.ScriptedEngine) sleeps ``--delay`` seconds per call, like a remote model. One AET run
(wave 0: 4 sub-questions; reflection adds 4 more, 2 of them under q1; every agent searches, reads a page and
finishes) over a small real offline corpus is timed with threads=1 and threads=4.

* ideal wall time at T threads: the LM calls along the longest dependency chain, computed from the recorded run
  (decompose, then per wave the busiest agent's calls, each reflection, each synthesis level, the root synthesis and
  the final answer; a wave with more nodes than threads needs ceil(n/T) rounds), times the delay;
* overhead per LM call: at threads=1 every call is sequential, so (wall - calls x delay) / calls; also measured
  with delay=0 (wall / calls: the framework plus the scripted engine and the offline corpus).

Run: python bench/bench_aet.py [--delay 0.2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import dspy  # noqa: E402

from memento.core.config import Budgets, load_settings  # noqa: E402
from memento.programs.adaptive_exploration_tree import AdaptiveExplorationTree  # noqa: E402
from memento.testing import ScriptedEngine, script_search_then_scrape, scripted_lm  # noqa: E402
from memento.web.factory import web_tools_factory  # noqa: E402
from memento.web.offline_corpus import OfflineCorpus  # noqa: E402

TOPICS = ["Dune", "Frank Herbert", "Tacoma", "Arrakis", "spice melange", "Paul Atreides", "House Harkonnen", "Caladan"]


def build_corpus(root: Path) -> Path:
    src = root / "docs.jsonl"
    lines = []
    for i, topic in enumerate(TOPICS * 4):
        lines.append(
            json.dumps(
                {
                    "url": f"https://ex.org/{i}",
                    "title": f"{topic} ({i})",
                    "text": f"{topic} is discussed in document {i}. " * 20,
                    "published": "2001-01-01",
                }
            )
        )
    src.write_text("\n".join(lines), encoding="utf-8")
    OfflineCorpus.build([src], root / "index")
    return root / "index"


def make_engine(delay: float) -> ScriptedEngine:
    engine = ScriptedEngine(delay=delay)
    script_search_then_scrape(engine, "https://ex.org/1")
    engine.when("sub_questions", sub_questions=[f"What is {t}?" for t in TOPICS[:4]])
    engine.when(
        "new_questions",
        times=1,
        new_questions=[
            {"question": f"Who created {TOPICS[4]}?", "parent_id": "q1"},
            {"question": f"Where is {TOPICS[5]} from?", "parent_id": "q1"},
            {"question": f"What is {TOPICS[6]}?", "parent_id": "root"},
            {"question": f"What is {TOPICS[7]}?", "parent_id": "root"},
        ],
    )
    engine.when("new_questions", new_questions=[])
    return engine


def critical_path(engine: ScriptedEngine, trajectory, threads: int) -> int:
    """LM calls along the longest dependency chain of a recorded run, at ``threads`` workers."""
    per_question: dict[str, int] = {}
    for call in engine.calls:
        if "task" in call.inputs and "question" in call.inputs and "findings" not in call.inputs:
            q = call.inputs["question"]
            per_question[q] = per_question.get(q, 0) + 1
    subs = [n for n in trajectory.nodes if n.id != "root"]
    chain = len(engine.calls_matching("sub_questions"))  # decompose
    for wave in sorted({n.wave for n in subs}):
        costs = sorted((per_question.get(n.question, 0) for n in subs if n.wave == wave), reverse=True)
        rounds = math.ceil(len(costs) / threads)
        # greedy lower bound: the busiest agent, or the work spread over the workers, whichever is larger
        chain += max(costs[0], math.ceil(sum(costs) / threads)) if rounds > 1 else costs[0]
    chain += len(engine.calls_matching("new_questions"))  # reflections are sequential
    decomposed = [n for n in subs if n.status == "decomposed"]
    depths = set()
    for node in decomposed:
        depth, cur = 0, node
        while cur.parent_id is not None:
            cur = trajectory.node(cur.parent_id)
            depth += 1
        depths.add(depth)
    chain += len(depths)  # one synthesis level at a time (a level's nodes run in parallel)
    chain += 1 + 1  # root synthesis, final answer
    return chain


def run_once(corpus: Path, delay: float, threads: int) -> dict:
    engine = make_engine(delay)
    settings = load_settings(flags={"web": {"corpus": str(corpus)}})
    aet = AdaptiveExplorationTree(
        "qa",
        web=web_tools_factory(settings),
        budgets=Budgets(initial_questions=4, total_questions=8, steps_per_question=5),
        threads=threads,
    )
    with dspy.context(lm=scripted_lm(make_engine(0.0))):
        aet(question="Warm-up question?")  # imports, index and adapter warm-up, not timed
    with dspy.context(lm=scripted_lm(engine)):
        started = time.perf_counter()
        pred = aet(question="What connects Dune, Frank Herbert and Tacoma?")
        wall = time.perf_counter() - started
    traj = pred.trajectory
    calls = traj.usage.lm_calls
    assert calls == len(engine.calls), (calls, len(engine.calls))
    return {
        "wall": wall,
        "calls": calls,
        "nodes": len(traj.nodes) - 1,
        "critical": critical_path(engine, traj, threads),
    }


def dspy_baseline(calls: int = 40) -> float:
    """Seconds per call of a bare ``dspy.Predict`` on the same scripted engine (delay 0): DSPy's own floor."""
    from memento.signatures.synthesize_node import SynthesizeNode

    predict = dspy.Predict(SynthesizeNode)
    with dspy.context(lm=scripted_lm(ScriptedEngine())):
        predict(task="t", question="q", findings="f")
        started = time.perf_counter()
        for i in range(calls):
            predict(task="t", question=f"q{i}", findings="f " * 200)
        return (time.perf_counter() - started) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        corpus = build_corpus(Path(tmp))
        rows = {}
        for threads in (1, 4):
            runs = [run_once(corpus, args.delay, threads) for _ in range(args.repeats)]
            rows[threads] = {
                "wall": statistics.median(r["wall"] for r in runs),
                "calls": runs[0]["calls"],
                "nodes": runs[0]["nodes"],
                "critical": runs[0]["critical"],
            }
        zero = [run_once(corpus, 0.0, 1) for _ in range(args.repeats)]
        floor = statistics.median(dspy_baseline() for _ in range(args.repeats))
    r1, r4 = rows[1], rows[4]
    ideal1 = r1["calls"] * args.delay
    ideal4 = r4["critical"] * args.delay
    over_delay = (r1["wall"] - ideal1) / r1["calls"]
    over_zero = statistics.median(z["wall"] / z["calls"] for z in zero)
    print(
        f"AET run: {r1['nodes']} sub-questions, {r1['calls']} LM calls, delay {args.delay * 1000:.0f} ms/call, "
        f"median of {args.repeats}"
    )
    print("| threads | wall (s) | ideal (s) | wall / ideal | LM calls on critical path |")
    print("|---|---|---|---|---|")
    print(f"| 1 | {r1['wall']:.2f} | {ideal1:.2f} | {r1['wall'] / ideal1:.2f} | {r1['calls']} (all sequential) |")
    print(f"| 4 | {r4['wall']:.2f} | {ideal4:.2f} | {r4['wall'] / ideal4:.2f} | {r4['critical']} |")
    print()
    print(f"speed-up threads=4 vs threads=1: {r1['wall'] / r4['wall']:.2f}x (ideal {ideal1 / ideal4:.2f}x)")
    print(
        f"framework overhead per LM call: {over_delay * 1000:.1f} ms (threads=1, delay {args.delay * 1000:.0f} ms); "
        f"{over_zero * 1000:.1f} ms (delay 0, incl. the scripted engine and the offline corpus)"
    )
    print(
        f"bare dspy.Predict on the same scripted engine: {floor * 1000:.1f} ms per call "
        f"(AET per-call cost at delay 0 / bare DSPy: {over_zero / floor:.2f}x)"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
