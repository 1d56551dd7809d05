"""Memory injection budget and retrieval at scale: M2/M3 grown to 10,000 rules each, M4 to 100,000 facts.

At each size the memory is filled with synthetic rules and facts (deterministic, seeded), then:

* **injected tokens**: the memory text a Memento run puts into its prompts (M1+M2 for Decompose/Reflect, M3+M4
  for the sub-question agent), estimated at 4 characters per token, against the per-store budgets: must never
  exceed them, whatever the size. The baseline is what injecting the whole book would cost.
* **prompt tokens per LM call**: a real Memento call (scripted LM, small offline corpus) is run and the prompt
  size of each LM call is measured (mean and max), so growth in memory would show up here.
* **retrieval latency**: the time of one task's memory reads (craft, decomposition, web-action, facts and one
  ``search_memory``), mean and p95 over the queries, ms.
* **distillation** (``--part distill``): one training batch of 10 and of 100 synthetic runs at the default research
  budgets (24 sub-questions, 3 searches with 5 result titles and 2 scrapes each) through the trainer with a
  scripted LM: per distiller, the runs it saw (and saw summarised) and its largest and mean prompt, in characters.
  The baseline is the previous trainer's cut (each run's record clipped at 6,000 characters, sub-question lines
  first, the batch's concatenation at 12,000): the runs whose search lines would have reached the M3 distiller.

Run: python bench/bench_memory.py [--part all|inject|distill] [--sizes 100,1000,10000] [--facts-per-rule 10]
[--queries 50] [--distill-runs 10,100]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import dspy  # noqa: E402

from memento.core.config import Budgets, load_settings  # noqa: E402
from memento.core.types import Evidence, Fact, Node, Rule, ToolCall, Trajectory  # noqa: E402
from memento.memory.embedder import HashingEmbedder  # noqa: E402
from memento.memory.memento_memory import MementoMemory, MemoryBudgets  # noqa: E402
from memento.memory.sqlite_store import estimate_tokens, index_columns  # noqa: E402
from memento.optimize.memento_trainer import MementoTrainer  # noqa: E402
from memento.optimize.run_digest import run_record, search_log  # noqa: E402
from memento.programs.memento_program import Memento  # noqa: E402
from memento.testing import ScriptedEngine, scripted_lm  # noqa: E402
from memento.web.factory import web_tools_factory  # noqa: E402

SYLLABLES = ["ka", "ro", "mi", "tan", "vel", "or", "is", "len", "dar", "qu", "su", "pex", "no", "bri", "zal", "et"]
PATTERNS = ["a court ruling", "a film", "a company", "a river", "an election", "a drug trial", "a treaty", "a merger"]
COVERS = ["its date", "its parties", "its location", "its outcome", "its sources", "its predecessor", "its cost"]


def words(rng: random.Random, n: int) -> list[str]:
    return ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))) for _ in range(n)]


def grow(memory: MementoMemory, rng: random.Random, *, rules: int, facts: int, vocab: list[str]) -> None:
    """Add synthetic rules to M2 and M3 and facts to M4 up to the given totals (one transaction per store)."""
    with memory.transaction(batch=1) as tx:
        for store in ("decomposition", "web_action"):
            have = memory.db.count(store)
            for i in range(have, rules):
                if store == "decomposition":
                    text = (
                        f"When the task mentions {rng.choice(PATTERNS)} about {rng.choice(vocab)}, add a "
                        f"sub-question that covers {rng.choice(COVERS)} of {rng.choice(vocab)}."
                    )
                else:
                    text = f"For {rng.choice(vocab)} queries, search {rng.choice(vocab)} {rng.choice(vocab)} in quotes."
                s, c = rng.randint(0, 20), rng.randint(0, 8)
                rule = Rule(
                    id=f"r-{store[:3]}-{i}",
                    store=store,
                    text=text,
                    support=s,
                    contradiction=c,
                    status="downweighted" if c > s else "active",
                    provenance=[f"t{i % 997}"],
                )
                data = rule.model_dump(mode="json")
                tx.put(store, rule.id, data, **index_columns(store, data))
        have = memory.db.count("facts")
        for i in range(have, facts):
            entity = vocab[i % len(vocab)].capitalize() + " " + vocab[(i * 7) % len(vocab)].capitalize()
            fact = Fact(
                id=f"f-{i}",
                entity=entity,
                text=f"{entity} is linked to {' '.join(words(rng, 6))}.",
                sources=[f"https://example.org/{i}"],
                provenance=[f"t{i % 997}"],
            )
            data = fact.model_dump(mode="json")
            tx.put("facts", fact.id, data, **index_columns("facts", data))
    if not memory.craft.all():
        for j in range(30):
            memory.craft.add(f"When researching {rng.choice(PATTERNS)}, check {rng.choice(COVERS)} first ({j}).")


def injected(memory: MementoMemory, query: str) -> dict[str, int]:
    view = memory.view(exclude_task_id="bench")
    texts = {
        "craft": view.craft_knowledge(query),
        "decomposition": view.decomposition_rules(query),
        "web_action": view.web_action_rules(query),
        "facts": view.known_facts(query),
    }
    return {name: estimate_tokens(text) for name, text in texts.items()}


def whole_book_tokens(memory: MementoMemory) -> int:
    rows = memory.db.query("SELECT coalesce(sum(length(text) + length(entity)), 0) FROM items")
    return int(rows[0][0]) // 4


def retrieval_ms(memory: MementoMemory, queries: list[str]) -> tuple[float, float]:
    times = []
    for q in queries:
        started = time.perf_counter()
        view = memory.view(exclude_task_id="bench")
        view.craft_knowledge(q)
        view.decomposition_rules(q)
        view.web_action_rules(q)
        view.known_facts(q)
        view.search(q, 5)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.mean(times), times[int(0.95 * (len(times) - 1))]


def prompt_tokens_per_call(memory: MementoMemory, corpus: Path, cache: Path, question: str) -> tuple[float, int, int]:
    """Run one Memento call with a scripted LM; (mean, max) prompt tokens per LM call and the number of calls."""
    engine = ScriptedEngine(overrides={"sub_questions": [question, question + " (details)"], "new_questions": []})
    engine.when(
        predicate=lambda c: "next_tool_name" in c.output_fields and "observation_0" not in c.prompt,
        next_tool_name="search_web",
        next_tool_args={"query": question},
    )
    settings = load_settings(flags={"web": {"corpus": str(corpus), "cache_dir": str(cache)}})
    program = Memento(
        "qa",
        memory=memory,
        web=web_tools_factory(settings),
        budgets=Budgets(initial_questions=2, total_questions=2, steps_per_question=3),
        threads=2,
    )
    with dspy.context(lm=scripted_lm(engine)):
        program(question=question, task_id="bench")
    sizes = [estimate_tokens(c.prompt) for c in engine.calls]
    return statistics.mean(sizes), max(sizes), len(sizes)


def synthetic_run(rng: random.Random, vocab: list[str], i: int, *, questions: int = 24) -> Trajectory:
    """A trajectory at the default research budgets: ``questions`` sub-questions, each 3 searches and 2 scrapes."""
    task = f"Task {i}: what links {rng.choice(vocab).capitalize()} and {rng.choice(vocab).capitalize()}?"
    nodes = [Node(id="root", question=task, status="decomposed")]
    calls: list[ToolCall] = []
    for q in range(questions):
        node_id = f"n{q}"
        url = f"https://ex.org/{rng.choice(vocab)}"
        nodes.append(
            Node(
                id=node_id,
                parent_id="root",
                wave=q // 5,
                question=f"Which {rng.choice(PATTERNS)} involved {' '.join(words(rng, 6))}?",
                answer=" ".join(words(rng, 30)),
                evidence=[Evidence(url=url, snippet=" ".join(words(rng, 20)))],
                status="answered",
                steps=6,
            )
        )
        for _ in range(3):
            titles = [" ".join(words(rng, 5)).title() for _ in range(5)]
            result = "\n".join(f"[{k}] {t}\n    https://ex.org/{k}\n    snippet" for k, t in enumerate(titles, 1))
            calls.append(
                ToolCall(
                    kind="search_web",
                    args={"query": " ".join(words(rng, 5))},
                    result=result,
                    result_urls=[f"https://ex.org/{k}" for k in range(5)],
                    node_id=node_id,
                )
            )
        calls.append(ToolCall(kind="scrape", args={"url": url}, result=" ".join(words(rng, 300)), node_id=node_id))
        calls.append(ToolCall(kind="scrape", args={"url": f"https://ex.org/{rng.choice(vocab)}"}, node_id=node_id))
    return Trajectory(task_id=f"r{i}", task_text=task, nodes=nodes, tool_calls=calls)


def old_runs_seen(trajectories: list[Trajectory]) -> tuple[int, int]:
    """Under the previous trainer's cut (6,000 per run, 12,000 per batch): runs in the M3 prompt, and runs whose
    search lines reached it."""
    logs = []
    for t in trajectories:
        lines = [f"[{n.status}] Q: {n.question}\n  A: {(n.answer or '')[:300]}" for n in t.nodes if n.parent_id]
        lines += [f"search: {c.args.get('query')!r} -> 5 results" for c in t.tool_calls if c.kind == "search_web"]
        logs.append(f"## task {t.task_id}: {t.task_text}\n" + "\n".join(lines)[:6000])
    shown = "\n\n".join(logs)[:12000]
    blocks = shown.split("## task ")[1:]
    return len(blocks), sum(1 for block in blocks if "search: " in block)


class _Replay:
    """A stand-in program that returns prepared trajectories (the bench measures distillation, not research)."""

    task = None

    def __init__(self, memory: MementoMemory, runs: dict[str, Trajectory]) -> None:
        self.memory = memory
        self.runs = runs

    def __call__(self, *, question: str, cutoff=None, task_id: str) -> dspy.Prediction:
        return dspy.Prediction(answer="an answer", trajectory=self.runs[task_id])


_DISTILLERS = {
    "craft_insights": lambda c: "run_record" in c.inputs and "insights" in c.output_fields,
    "web_rules": lambda c: "search_log" in c.inputs,
    "facts": lambda c: "facts" in c.output_fields,
    "coverage": lambda c: "coverage" in c.output_fields,
    "decomposition": lambda c: "judged_run" in c.inputs,
    "summaries": lambda c: "summary" in c.output_fields,
}


def distill_bench(root: Path, runs: int, rng: random.Random, vocab: list[str]) -> dict:
    """Train one batch of ``runs`` synthetic runs; per distiller: runs seen, summarised, prompt sizes."""
    trajectories = [synthetic_run(rng, vocab, i) for i in range(runs)]
    memory = MementoMemory(root / f"distill-{runs}", embedder=HashingEmbedder())
    engine = ScriptedEngine()
    engine.when(predicate=lambda c: "summary" in c.output_fields, summary=lambda c: c.inputs["run_record"][:2000])
    dspy.configure(lm=scripted_lm(engine))
    program = _Replay(memory, {t.task_id: t for t in trajectories})
    examples = [
        dspy.Example(id=t.task_id, question=t.task_text, answer="x").with_inputs("question") for t in trajectories
    ]
    trainer = MementoTrainer(program, lambda ex, pred: 1.0, memory, batch_size=runs, threads=4)
    started = time.perf_counter()
    [report] = trainer.fit(examples)
    seconds = time.perf_counter() - started
    old_any, old_searches = old_runs_seen(trajectories)
    out: dict = {"runs": runs, "old_m3_runs": old_any, "old_m3_runs_with_queries": old_searches}
    out["seconds"] = round(seconds, 1)
    for name, match in _DISTILLERS.items():
        sizes = [len(c.prompt) for c in engine.calls if match(c)]
        stats = report.distillers.get(name)
        out[name] = {
            "seen": stats.seen if stats else len(sizes),
            "summarised": stats.summarised if stats else 0,
            "calls": len(sizes),
            "max_chars": max(sizes, default=0),
            "mean_chars": round(statistics.mean(sizes)) if sizes else 0,
        }
    out["largest_prompt_chars"] = max(len(c.prompt) for c in engine.calls)
    out["record_chars_max"] = max(len(run_record(t)) for t in trajectories)
    out["search_log_chars_max"] = max(len(search_log(t)) for t in trajectories)
    return out


def print_distill(rows: list[dict]) -> None:
    print()
    print(
        "| runs per batch | run record / search log, chars (max) | "
        "M3 runs seen (with their queries): previous cut → now | "
        "craft insights seen (summarised) | web rules seen (summarised) | facts seen | coverage / M2 seen | "
        "largest distiller prompt, chars | mean M3 prompt, chars |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['runs']} | {r['record_chars_max']:,} / {r['search_log_chars_max']:,} | "
            f"{r['old_m3_runs']} ({r['old_m3_runs_with_queries']}) → {r['web_rules']['seen']} "
            f"({r['web_rules']['seen']}) | "
            f"{r['craft_insights']['seen']} ({r['craft_insights']['summarised']}) | "
            f"{r['web_rules']['seen']} ({r['web_rules']['summarised']}) | {r['facts']['seen']} | "
            f"{r['coverage']['seen']} / {r['decomposition']['seen']} | {r['largest_prompt_chars']:,} | "
            f"{r['web_rules']['mean_chars']:,} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("all", "inject", "distill"), default="all")
    parser.add_argument("--sizes", default="100,1000,10000", help="rule counts per rule book (M2 and M3 each)")
    parser.add_argument("--facts-per-rule", type=int, default=10, help="M4 facts = this x rules")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--distill-runs", default="10,100", help="runs per training batch for --part distill")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    if args.part in ("all", "distill"):
        vocab = words(rng, 3000)
        with tempfile.TemporaryDirectory() as tmp:
            rows = []
            for runs in [int(n) for n in args.distill_runs.split(",")]:
                row = distill_bench(Path(tmp), runs, rng, vocab)
                rows.append(row)
                print(json.dumps(row), flush=True)
            print_distill(rows)
        if args.part == "distill":
            return
    rng = random.Random(args.seed)
    vocab = words(rng, 3000)
    budgets = MemoryBudgets()
    limit = {
        "craft": budgets.craft,
        "decomposition": budgets.decomposition,
        "web_action": budgets.web_action,
        "facts": budgets.facts,
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        corpus = root / "corpus.jsonl"
        corpus.write_text(
            "".join(
                json.dumps({"url": f"https://ex.org/{i}", "title": w, "text": f"{w} " * 50}) + "\n"
                for i, w in enumerate(vocab[:50])
            ),
            encoding="utf-8",
        )
        memory = MementoMemory(root / "mem", budgets=budgets)
        queries = [
            f"What {rng.choice(PATTERNS)} involved {rng.choice(vocab).capitalize()} {rng.choice(vocab).capitalize()} "
            f"and {rng.choice(vocab)}?"
            for _ in range(args.queries)
        ]
        rows = []
        for size in [int(s) for s in args.sizes.split(",")]:
            started = time.perf_counter()
            grow(memory, rng, rules=size, facts=size * args.facts_per_rule, vocab=vocab)
            fill_s = time.perf_counter() - started
            per_query = [injected(memory, q) for q in queries]
            worst = {name: max(p[name] for p in per_query) for name in limit}
            within = all(worst[name] <= limit[name] for name in limit)
            mean_ms, p95_ms = retrieval_ms(memory, queries)
            mean_tok, max_tok, calls = prompt_tokens_per_call(memory, corpus, root / "cache", queries[0])
            whole = whole_book_tokens(memory)
            injected_total = max(sum(p.values()) for p in per_query)
            row = {
                "rules_per_book": size,
                "facts": size * args.facts_per_rule,
                "fill_s": round(fill_s, 1),
                "max_injected_tokens": worst,
                "within_budget": within,
                "injected_total_max": injected_total,
                "whole_book_tokens": whole,
                "prompt_tokens_per_call_mean": round(mean_tok, 1),
                "prompt_tokens_per_call_max": max_tok,
                "lm_calls": calls,
                "retrieval_ms_mean": round(mean_ms, 2),
                "retrieval_ms_p95": round(p95_ms, 2),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
        print()
        print(
            "| rules per book (M2, M3) | facts (M4) | max injected tokens M1/M2/M3/M4 (budget "
            f"{limit['craft']}/{limit['decomposition']}/{limit['web_action']}/{limit['facts']}) | within budget | "
            "whole book, tokens | injected / whole book | prompt tokens per LM call, mean (max) | "
            "retrieval per task, ms mean (p95) |"
        )
        print("|---:|---:|---|:---:|---:|---:|---:|---:|")
        for r in rows:
            w = r["max_injected_tokens"]
            print(
                f"| {r['rules_per_book']:,} | {r['facts']:,} | {w['craft']}/{w['decomposition']}/{w['web_action']}/"
                f"{w['facts']} | {'yes' if r['within_budget'] else 'NO'} | {r['whole_book_tokens']:,} | "
                f"{r['injected_total_max'] / max(1, r['whole_book_tokens']):.4f} | "
                f"{r['prompt_tokens_per_call_mean']} ({r['prompt_tokens_per_call_max']}) | "
                f"{r['retrieval_ms_mean']} ({r['retrieval_ms_p95']}) |"
            )
        if not all(r["within_budget"] for r in rows):
            sys.exit(1)


if __name__ == "__main__":
    main()
