"""What one MEMENTO sales task costs (issue 26's extrapolation to 1,000 sales tasks): LM calls, prompt tokens and
searches per task, and the memory a training run leaves on disk, measured on a real `memento train` / `memento eval
--task sales --method memento` against a test server (memento.testing.OpenAICompatServer, no latency).

The model is scripted (tests/memento_training_fixture.py's distillers and judges, plus sales rules here), so the *shape*
of each run is assumed: the tree uses the default budgets (5 sub-questions in wave 0, reflection adds more until 24 are
asked) and every sub-question agent either searches, reads one page and finishes ("short agents") or spends its whole
step budget searching and reading ("full agents", 10 steps). What is measured is what the framework does for that shape:
the LM calls it makes (counted by the server), their prompt sizes (characters / 4), the searches and fetches, and the
bytes of the trained memory directory (the scripted distillers add one new M2 rule, one M3 rule and one M4 fact per
call, in batches of 2). Sales rows and the corpus are made up here.

    python bench/bench_sales_footprint.py [--train 4] [--test 4]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from memento_training_fixture import make_engine  # noqa: E402

from memento.testing import OpenAICompatServer  # noqa: E402

COMPANIES = ["Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Soylent", "Tyrell", "Wonka"]
PRODUCTS = ["Acme Stream: real-time ingestion", "Acme Vault: governed storage", "Acme Lens: fleet dashboards"]
CORPUS_URL = re.compile(r"corpus://[\w-]+")


def _write_inputs(base: Path, n: int) -> tuple[Path, Path]:
    docs, rows = [], []
    for i in range(n):
        name = COMPANIES[i % len(COMPANIES)] + (f" {i // len(COMPANIES)}" if i >= len(COMPANIES) else "")
        slug = name.lower().replace(" ", "-")
        docs.append({"doc_id": slug, "title": f"{name} news", "text": f"{name} expands its cold-chain fleet. " * 30,
                     "published": "2023-06-01"})  # fmt: skip
        rows.append({
            "id": f"acme-{slug}", "seller": "Acme Analytics, a data-platform vendor", "products": PRODUCTS,
            "customer": f"{name}, a logistics company expanding into cold-chain shipping",
            "value_propositions": [{"pain_point": "spoiled cargo", "mechanism": "Acme Stream alerts", "evidence": "x"}],
            "published": "2024-05-17",
        })  # fmt: skip
    corpus = base / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    data = base / "sales.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return corpus, data


def _observations(call: Any) -> list[str]:
    return [call.inputs[k] for k in sorted(call.inputs) if k.startswith("observation_")]


def _engine(full_agents: bool) -> Any:
    def step(call: Any) -> str:
        seen = _observations(call)
        if full_agents:  # search and read in turn until the step budget ends the agent
            return "scrape" if len(seen) % 2 == 1 and CORPUS_URL.search(seen[-1]) else "search_web"
        if not seen:
            return "search_web"
        return "scrape" if len(seen) == 1 and CORPUS_URL.search(seen[0]) else "finish"

    def args(call: Any) -> dict[str, Any]:
        name, seen = step(call), _observations(call)
        if name == "search_web":
            return {"query": f"{call.inputs.get('question', '')[:60]} {len(seen)}"}
        match = CORPUS_URL.search(seen[-1]) if name == "scrape" else None
        return {"url": match.group(0)} if match else {}

    asked = iter(range(10**6))
    written = iter(range(10**6))  # distillers write new items each time, as a model learning from each batch would

    def company(call: Any) -> str:
        return next((name for name in COMPANIES if name in call.prompt), "the customer")

    def rule(template: str) -> Any:
        return lambda c: [{"op": "add", "text": template.format(company(c), next(written)), "reason": "it worked"}]

    def facts(call: Any) -> list[dict[str, Any]]:
        name = company(call)
        slug = name.lower()
        return [{"entity": name, "fact": f"{name} runs cold-chain route {next(written)} since 2023.",
                 "sources": [f"corpus://{slug}"]}]  # fmt: skip

    proposition = {"pain_point": "spoiled cargo", "mechanism": "Acme Stream alerts", "evidence": "news"}
    rules = [
        {"predicate": lambda c: "operations" in c.output_fields and "search_log" in c.inputs,
         "operations": rule("Search the trade press for {0}'s logistics news before its own site (rule {1}).")},
        {"predicate": lambda c: "operations" in c.output_fields and "judged_run" in c.inputs,
         "operations": rule("Ask one sub-question on {0}'s fleet and one on its customers (rule {1}).")},
        {"predicate": lambda c: "facts" in c.output_fields, "facts": facts},
        {"predicate": lambda c: "next_tool_name" in c.output_fields and "task_kind" not in c.inputs,
         "next_tool_name": step, "next_tool_args": args, "next_thought": "look it up"},
        {"predicate": lambda c: "sub_questions" in c.output_fields,
         "sub_questions": lambda c: [f"What is {company(c)} doing in cold-chain shipping ({k})?" for k in range(5)]},
        {"predicate": lambda c: "new_questions" in c.output_fields, "reflection": "more to find",
         "new_questions": lambda c: [
             {"question": f"Which {company(c)} cold-chain fleet news matters ({next(asked)})?", "parent_id": "root"}
             for _ in range(5)
         ]},
        {"predicate": lambda c: "value_propositions" in c.output_fields,
         "value_propositions": [proposition]},
        {"predicate": lambda c: "ground_truth" in c.inputs and "score" in c.output_fields, "score": 3,
         "rationale": "partly covered"},
    ]  # fmt: skip
    return make_engine(first=rules)


def _memento(env: dict[str, str], *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "memento.cli", *args], env=env, capture_output=True, text=True,
                          timeout=3600)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"memento {args[0]} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")


def _bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", type=int, default=4, help="training tasks")
    parser.add_argument("--test", type=int, default=4, help="test tasks")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-sales-"))
    corpus, data = _write_inputs(base, args.train + args.test)
    rows = data.read_text(encoding="utf-8").splitlines()
    train, test = base / "train.jsonl", base / "test.jsonl"
    train.write_text("\n".join(rows[: args.train]) + "\n", encoding="utf-8")
    test.write_text("\n".join(rows[args.train :]) + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMENTO_")}
    env.update(COLUMNS="200", MEMENTO_LM_CACHE="false", MEMENTO_LM_API_KEY="bench", DSPY_CACHEDIR=str(base / "dspy"),
               LITELLM_LOCAL_MODEL_COST_MAP="True", HF_HUB_OFFLINE="1")  # fmt: skip
    common = ("--task", "sales", "--corpus", str(corpus), "--lm", "openai/x", "--threads", "2")
    memory = base / "memory"
    with OpenAICompatServer(_engine(full_agents=False)) as server:
        _memento(env, "train", *common, "--api-base", server.api_base, "--data", str(train), "--memory", str(memory),
                 "--batch-size", "2", "--embedder", "hashing")  # fmt: skip
        train_calls = server.chat_requests
    stats = subprocess.run([sys.executable, "-m", "memento.cli", "memory", "stats", "--memory", str(memory)], env=env,
                           capture_output=True, text=True, timeout=600).stdout  # fmt: skip
    print(f"train: {args.train} sales tasks (short agents), {train_calls} LM calls "
          f"({train_calls / args.train:.0f} per task, distillation included)")  # fmt: skip
    print(f"trained memory: {_bytes(memory) / 1e6:.2f} MB on disk ({_bytes(memory) / args.train / 1e3:.0f} kB per "
          f"training task)")  # fmt: skip
    print(stats.strip())
    for label, full in (("short agents", False), ("full agents", True)):
        out = base / f"eval-{'full' if full else 'short'}"
        with OpenAICompatServer(_engine(full_agents=full)) as server:
            _memento(env, "eval", *common, "--api-base", server.api_base, "--data", str(test), "--method", "memento",
                     "--memory", str(memory), "--out", str(out))  # fmt: skip
            calls = server.chat_requests
            prompt_chars = sum(len(json.dumps(r["body"].get("messages", []))) for r in server.requests)
        result = json.loads((out / "results.json").read_text())
        usage = result.get("usage") or {}
        n = args.test
        stages = {k: v["lm_calls"] for k, v in sorted((usage.get("by_stage") or {}).items())}
        judge = (result.get("judge_usage") or {}).get("lm_calls", 0)
        print(f"eval ({label}): {calls / n:.1f} LM calls per task at the server ({judge / n:.1f} of them the judge)"
              f", {prompt_chars / 4 / max(1, calls):.0f} prompt tokens per call (chars / 4), "
              f"{usage.get('searches', 0) / n:.1f} searches and {usage.get('fetches', 0) / n:.1f} fetches per task, "
              f"{_bytes(out) / n / 1e3:.0f} kB of results per task, errors {result.get('errors')}")  # fmt: skip
        print(f"  LM calls per task by stage: {', '.join(f'{k} {v / n:.1f}' for k, v in stages.items())}")


if __name__ == "__main__":
    main()
