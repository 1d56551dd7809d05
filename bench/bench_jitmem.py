"""Benchmark JitMem: executor prompt tokens with the curated payload vs the k raw trajectories, and BM25 latency.

For banks of 10, 1,000 and 100,000 synthetic but realistic trajectories (task texts built from the real multi-hop
questions and Wikipedia titles in /work/shared/data; each trajectory has sub-question nodes with answers, search
results and a scraped page drawn from the Wikipedia summaries, and a final answer), the script measures:

* store: writing the bank (transactions of 5,000); BM25 index: building and persisting it; reopen: opening the
  bank and loading the persisted index; update: applying one stream batch of 10 trajectories and re-indexing;
* retrieval latency of ``bank.retrieve(task, k=3)`` (median and p95 over held-out queries);
* the executor's prompt tokens (tiktoken ``cl100k_base``, counted on the prompt DSPy actually sends) when its
  context is the curated payload vs the 3 raw trajectories pasted in (complete, and as the curator reads them:
  tool results cut to 300 characters, 1,500-token budget each), and the curator's own prompt tokens.

There is no network LM here, so the curator is a deterministic *extractive* stand-in (a scripted LM): it keeps
each retrieved task, its final answer and sources, the queries that were run, and one line of guidance, which is
the structure the CurateMemory prompt asks for. Payload sizes from a real LM will differ.

Usage:
    python bench/bench_jitmem.py                       # sizes 10, 1000, 100000
    python bench/bench_jitmem.py --sizes 10,1000 --queries 20
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import dspy  # noqa: E402
from litellm.litellm_core_utils.default_encoding import encoding as ENC  # noqa: E402  (cl100k_base, bundled offline)

from memento.core.types import Evidence, Node, ToolCall, Trajectory  # noqa: E402
from memento.memory.trajectory_bank import TrajectoryBank  # noqa: E402
from memento.programs.baselines import ClosedBook  # noqa: E402
from memento.programs.jitmem_curator import JitMemCurator, render_trajectories  # noqa: E402
from memento.testing import ScriptedEngine, scripted_lm  # noqa: E402

DATA = Path("/work/shared/data")
TEMPLATES = [
    "Who founded {a}, and in which year?",
    "What connects {a} and {b}?",
    "Which came first, {a} or {b}, and by how many years?",
    "How did {a} influence {b}?",
    "What is the origin of the name {a}?",
    "In which country is {a} based, and who leads it today?",
    "Which notable person is associated with both {a} and {b}?",
    "What was the main outcome of {a}?",
]


def tokens(text: str) -> int:
    return len(ENC.encode(text, disallowed_special=()))


def load_sources() -> tuple[list[str], list[tuple[str, str]]]:
    questions = [json.loads(line)["question"] for line in (DATA / "multihop/questions.jsonl").open(encoding="utf-8")]
    wiki = json.loads((DATA / "wiki_vital/summaries_en-us.json").read_text(encoding="utf-8"))
    pages = [(v["title"], v["extract"]) for v in wiki.values() if len(v.get("extract", "")) > 200]
    return questions, pages


def make_task(rng: random.Random, questions: list[str], pages: list[tuple[str, str]]) -> str:
    if rng.random() < 0.1:
        return rng.choice(questions)
    a, b = rng.sample(pages, 2)
    return rng.choice(TEMPLATES).format(a=a[0], b=b[0])


def _url(title: str) -> str:
    return "https://en.wikipedia.org/wiki/" + title.replace(" ", "_")


def make_trajectory(i: int, rng: random.Random, task: str, pages: list[tuple[str, str]]) -> Trajectory:
    """A research run as the AET records it: 3 sub-questions, each with 2 searches (5 results) and 1 scraped page."""
    nodes, calls = [], []
    for j, (title, extract) in enumerate(rng.sample(pages, 3)):
        node_id = f"n{j}"
        sentence = extract.split(". ")[0][:300]
        nodes.append(
            Node(
                id=node_id,
                parent_id=None if j == 0 else "n0",
                wave=0 if j == 0 else 1,
                question=f"What is known about {title} relevant to: {task[:80]}",
                answer=sentence,
                status="answered",
                evidence=[Evidence(url=_url(title), title=title, snippet=sentence[:160])],
                steps=rng.randint(2, 6),
            )
        )
        for query in (f"{title} {task.split()[1]}", f"{title} history"):
            found = rng.sample(pages, 5)
            results = "\n".join(f"[{k + 1}] {t} ({_url(t)})\n{e[:200]}" for k, (t, e) in enumerate(found))
            calls.append(
                ToolCall(
                    kind="search_web",
                    args={"query": query},
                    result=results,
                    result_urls=[_url(t) for t, _ in found],
                    node_id=node_id,
                    ms=rng.uniform(200, 900),
                )
            )
        page = (extract + "\n\n" + rng.choice(pages)[1])[:2500]
        calls.append(ToolCall(kind="scrape", args={"url": _url(title)}, result=page, node_id=node_id))
    return Trajectory(
        task_id=f"syn-{i}",
        task_text=task,
        inputs={"question": task},
        method="aet",
        nodes=nodes,
        tool_calls=calls,
        prediction={"answer": (nodes[0].answer or "")[:120], "sources": [nodes[0].evidence[0].url]},
    )


_TASK = re.compile(r"^Task: (.*)$", re.M)
_ANSWER = re.compile(r"^Final answer: (.*)$", re.M)
_QUERY = re.compile(r'search_web\(query="([^"]*)"\)')


def extractive_curator(call) -> str:
    """A deterministic stand-in for the curator LM: keeps tasks, answers, queries and one guidance line."""
    text = call.inputs.get("past_trajectories", "")
    task = call.inputs.get("task", "")
    blocks = [b for b in text.split("### Past trajectory") if b.strip()]
    lines = ["Relevant past experiences:"]
    queries: list[str] = []
    for block in blocks:
        past = _TASK.search(block)
        answer = _ANSWER.search(block)
        lines.append(f"- {past.group(1) if past else '?'} -> {answer.group(1)[:160] if answer else 'no answer'}")
        queries.extend(_QUERY.findall(block)[:2])
    lines.append("Strategies that worked: searches such as " + "; ".join(f'"{q}"' for q in queries[:4]) + ".")
    lines.append(
        f"Guidance for this task: decompose '{task[:100]}' into its entities, search each one, "
        "and confirm dates and names on the scraped page before answering."
    )
    return "\n".join(lines)


def executor_prompt_tokens(engine: ScriptedEngine, executor: ClosedBook, question: str, context: str) -> int:
    start = len(engine.calls)
    executor(question=question, context=context)
    return tokens(engine.calls[start].prompt)


def bench_size(size: int, *, queries: int, root: Path, sources) -> dict:
    questions, pages = sources
    rng = random.Random(size)
    directory = root / f"bank-{size}"
    shutil.rmtree(directory, ignore_errors=True)
    bank = TrajectoryBank(directory)
    generate_s = build_s = 0.0
    for start in range(0, size, 5_000):  # chunks keep memory flat; one transaction each, indexed once at the end
        t0 = time.perf_counter()
        chunk = [
            (make_trajectory(i, rng, make_task(rng, questions, pages), pages), True)
            for i in range(start, min(size, start + 5_000))
        ]
        generate_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        bank.add_many(chunk)
        build_s += time.perf_counter() - t0
    t0 = time.perf_counter()
    bank.retrieve("warm up query", k=3)  # builds and persists the BM25 index
    index_s = time.perf_counter() - t0
    bank.close()
    started = time.perf_counter()
    bank = TrajectoryBank(directory)
    bank.retrieve("warm up query", k=3)
    reopen_s = time.perf_counter() - started
    batch = [(make_trajectory(size + i, rng, make_task(rng, questions, pages), pages), True) for i in range(10)]
    started = time.perf_counter()
    bank.add_many(batch)  # one stream batch applied...
    bank.retrieve("warm up query", k=3)  # ...and re-indexed by the next retrieval
    update_s = time.perf_counter() - started

    qrng = random.Random(10_000 + size)
    held_out = [make_task(qrng, questions, pages) for _ in range(queries)]
    latencies = []
    for query in held_out:
        t0 = time.perf_counter()
        hits = bank.retrieve(query, k=3)
        latencies.append((time.perf_counter() - t0) * 1000)
    latencies.sort()

    engine = ScriptedEngine()
    engine.when("You are a memory curator", payload=extractive_curator)
    executor = ClosedBook("qa")
    curator = JitMemCurator()
    payload_t, raw_t, clipped_t, curator_t = [], [], [], []
    with dspy.context(lm=scripted_lm(engine)):
        for query in held_out[: min(20, len(held_out))]:
            hits = bank.retrieve(query, k=3)
            if not hits:
                continue
            start = len(engine.calls)
            payload = curator(task=query, trajectories=hits).payload
            curator_t.append(tokens(engine.calls[start].prompt))
            payload_t.append(executor_prompt_tokens(engine, executor, query, payload))
            raw = render_trajectories(hits, max_tokens_per_trajectory=None, result_chars=None)
            raw_t.append(executor_prompt_tokens(engine, executor, query, raw))
            clipped = curator.render(hits)  # what the curator reads: results cut, budget per trajectory
            clipped_t.append(executor_prompt_tokens(engine, executor, query, clipped))
    size_mb = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file()) / 1e6
    mean = statistics.fmean
    return {
        "size": size,
        "generate_s": generate_s,
        "build_s": build_s,
        "index_s": index_s,
        "reopen_s": reopen_s,
        "update_s": update_s,
        "disk_mb": size_mb,
        "p50_ms": latencies[len(latencies) // 2],
        "p95_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))],
        "payload_tokens": mean(payload_t),
        "raw_tokens": mean(raw_t),
        "clipped_tokens": mean(clipped_t),
        "curator_tokens": mean(curator_t),
        "samples": len(payload_t),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,1000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--root", default=None, help="where banks are built (default: a temp dir, removed after)")
    args = parser.parse_args(argv)
    root = Path(args.root) if args.root else Path(tempfile.mkdtemp(prefix="bench-jitmem-"))
    sources = load_sources()
    rows = []
    try:
        for size in [int(s) for s in args.sizes.split(",")]:
            row = bench_size(size, queries=args.queries, root=root, sources=sources)
            rows.append(row)
            print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}), file=sys.stderr)
    finally:
        if not args.root:
            shutil.rmtree(root, ignore_errors=True)
    print(
        "| bank size | store | BM25 index | reopen | apply 10 adds + re-index | disk | BM25 p50 | BM25 p95 "
        "| executor prompt, payload | executor prompt, 3 raw | ratio | 3 raw as the curator reads them | ratio "
        "| curator prompt | (curator + executor) / 3 raw |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['size']:,} | {r['build_s']:.2f} s | {r['index_s']:.2f} s | {r['reopen_s'] * 1000:.0f} ms "
            f"| {r['update_s']:.2f} s "
            f"| {r['disk_mb']:.0f} MB | {r['p50_ms']:.2f} ms | {r['p95_ms']:.2f} ms | {r['payload_tokens']:.0f} "
            f"| {r['raw_tokens']:.0f} | {r['payload_tokens'] / r['raw_tokens']:.2f} | {r['clipped_tokens']:.0f} "
            f"| {r['payload_tokens'] / r['clipped_tokens']:.2f} | {r['curator_tokens']:.0f} "
            f"| {(r['curator_tokens'] + r['payload_tokens']) / r['raw_tokens']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
