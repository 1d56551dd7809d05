"""Token estimates: litellm's tokenizer count (what ``estimate_tokens`` uses) against the former 4-characters rule.

Memory budgets count the tokens of every candidate rule and fact on each read, so the count sits on the retrieval
path. Measured on the synthetic memory of ``bench_memory.py`` (``--rules`` per rule book, 10x facts):

* **per text**: µs per call over the rendered rules and facts — the 4-character heuristic, ``litellm.encode``
  uncached, and ``estimate_tokens`` on a warm cache (the same texts counted again, as a budget re-selects them);
* **per task read**: ms for one task's memory reads (craft, decomposition, web-action, facts) with each count
  plugged into the stores, mean over the queries: a first pass from an empty cache, then a second pass;
* **agreement**: tokens by litellm / tokens by the heuristic over all texts.

Run: python bench/bench_tokens.py [--rules 1000] [--queries 50]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import litellm  # noqa: E402
from bench_memory import PATTERNS, grow, words  # noqa: E402

import memento.memory.domain_store as domain_store  # noqa: E402
import memento.memory.memory_view as memory_view  # noqa: E402
import memento.memory.rule_book as rule_book  # noqa: E402
from memento.memory.memento_memory import MementoMemory  # noqa: E402
from memento.memory.sqlite_store import estimate_tokens  # noqa: E402

#: the modules that count tokens to fill a budget (a memory view reads M1/M2/M4 items through memory_view)
STORES: tuple[ModuleType, ...] = (domain_store, memory_view, rule_book)


def heuristic(text: str) -> int:
    return (len(text) + 3) // 4


def per_call_us(fn, texts: list[str]) -> float:
    started = time.perf_counter()
    for t in texts:
        fn(t)
    return (time.perf_counter() - started) / len(texts) * 1e6


def read_ms(memory: MementoMemory, queries: list[str], count) -> tuple[float, float]:
    """Mean ms per task read: first pass (cold cache), second pass (warm)."""
    for module in STORES:
        setattr(module, "estimate_tokens", count)  # noqa: B010 - the counter every budget read uses
    try:
        passes = []
        for _ in range(2):
            times = []
            for q in queries:
                started = time.perf_counter()
                view = memory.view(exclude_task_id="bench")
                view.craft_knowledge(q), view.decomposition_rules(q), view.web_action_rules(q), view.known_facts(q)
                times.append((time.perf_counter() - started) * 1000)
            passes.append(statistics.mean(times))
        return passes[0], passes[1]
    finally:
        for module in STORES:
            setattr(module, "estimate_tokens", estimate_tokens)  # noqa: B010


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rules", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    rng = random.Random(0)
    vocab = words(rng, 3000)
    with tempfile.TemporaryDirectory() as tmp:
        memory = MementoMemory(Path(tmp) / "mem")  # no relevance stage (the default)
        grow(memory, rng, rules=args.rules, facts=args.rules * 10, vocab=vocab)
        texts = [memory.decomposition.render_rule(r) for r in memory.decomposition.all()]
        texts += [memory.web_action.render_rule(r) for r in memory.web_action.all()]
        texts += [memory.facts.render_fact(f) for f in memory.facts.all()]
        queries = [
            f"What {rng.choice(PATTERNS)} involved {rng.choice(vocab).capitalize()}?" for _ in range(args.queries)
        ]
        estimate_tokens.cache_clear()
        litellm.encode(model="", text="warm up the tokenizer")
        rows = {
            "4-character rule": per_call_us(heuristic, texts),
            "litellm.encode, uncached": per_call_us(lambda t: len(litellm.encode(model="", text=t)), texts),
        }
        for t in texts:
            estimate_tokens(t)
        rows["estimate_tokens, warm cache"] = per_call_us(estimate_tokens, texts)
        ratio = sum(estimate_tokens(t) for t in texts) / sum(heuristic(t) for t in texts)
        heuristic_ms = read_ms(memory, queries, heuristic)
        estimate_tokens.cache_clear()
        litellm_ms = read_ms(memory, queries, estimate_tokens)
    print(f"{len(texts):,} texts ({args.rules:,} rules per book, {args.rules * 10:,} facts), {len(queries)} queries")
    print("| count | µs per text |")
    print("|---|---:|")
    for name, us in rows.items():
        print(f"| {name} | {us:.2f} |")
    print()
    for label, k in (("first pass, cold cache", 0), ("second pass, warm cache", 1)):
        print(
            f"per task read, {label}: 4-character rule {heuristic_ms[k]:.2f} ms, estimate_tokens "
            f"{litellm_ms[k]:.2f} ms (ratio {litellm_ms[k] / heuristic_ms[k]:.2f})"
        )
    print(f"tokens counted by litellm / by the 4-character rule: {ratio:.3f}")


if __name__ == "__main__":
    main()
