"""Memory injection budget and retrieval at scale: M2/M3 grown to 10,000 rules each, M4 to 100,000 facts.

At each size the memory is filled with synthetic rules and facts (deterministic, seeded), then:

* **injected tokens**: the memory text a Memento run puts into its prompts (M1+M2 for Decompose/Reflect, M3+M4
  for the sub-question agent), estimated at 4 characters per token, against the per-store budgets: must never
  exceed them, whatever the size. The baseline is what injecting the whole book would cost.
* **prompt tokens per LM call**: a real Memento call (scripted LM, small offline corpus) is run and the prompt
  size of each LM call is measured (mean and max), so growth in memory would show up here.
* **retrieval latency**: the time of one task's memory reads (craft, decomposition, web-action, facts and one
  ``search_memory``), mean and p95 over the queries, ms.

Run: python bench/bench_memory.py [--sizes 100,1000,10000] [--facts-per-rule 10] [--queries 50]
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

from memento.config import Budgets, load_settings  # noqa: E402
from memento.memory.memento_memory import MementoMemory, MemoryBudgets  # noqa: E402
from memento.memory.sqlite_store import estimate_tokens, index_columns  # noqa: E402
from memento.programs.memento_program import Memento  # noqa: E402
from memento.testing import ScriptedEngine, scripted_lm  # noqa: E402
from memento.types import Fact, Rule  # noqa: E402
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,1000,10000", help="rule counts per rule book (M2 and M3 each)")
    parser.add_argument("--facts-per-rule", type=int, default=10, help="M4 facts = this x rules")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
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
        memory = MementoMemory(root / "mem", budgets=budgets, relevance_check=False)
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
