"""Threads in one process vs the Ray executor on two nodes (issue 26): `memento eval` of 64 examples against a test
server that answers each request after 200 ms.

Each configuration is one `memento eval --method closed_book` (one LM call per example) in a subprocess; the two Ray
nodes are `ray start` processes on loopback addresses (memento.testing.RayNodes). Configurations: threads with
``--threads`` examples in flight (the baseline) and with twice as many (the same concurrency as the two nodes), Ray on
two nodes with ``--threads`` per node without an LM limit, with ``lm`` ``max_concurrency`` equal to the examples in
flight (the budget actor's round trips, no waiting) and with half of them (the limit binds). Printed per configuration:
the nodes that served examples (results.json), the evaluation's wall time (results.json ``seconds``) and its start-up
(that minus the server's span, first request to last answer: workers importing and building the program), the speed-up
over the baseline, all in and while requests flow (the server's spans), beside the ideal (examples in flight, capped by
the LM limit, over the baseline's), the framework overhead per LM call (the time each in-flight slot spent per call
beyond the server's latency) while requests flow and all in, the peak of requests in flight at the server (its own
count) against the configured limit, and the command's wall time (cluster connection and interpreter start included).

    python bench/bench_ray_executor.py [--n 64] [--latency 0.2] [--threads 4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memento.testing import OpenAICompatServer, RayNodes

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "examples" / "multihop" / "corpus.jsonl"


def _data(directory: Path, n: int) -> Path:
    rows = [{"id": f"q{i}", "question": f"What is item number {i}?", "answers": [f"item {i}"]} for i in range(n)]
    path = directory / "questions.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _run(env: dict[str, str], server: OpenAICompatServer, data: Path, out: Path, *args: str) -> dict:
    cmd = [
        sys.executable, "-m", "memento.cli", "eval", "--task", "qa", "--data", str(data), "--method", "closed_book",
        "--lm", "openai/x", "--api-base", server.api_base, "--out", str(out), "--corpus", str(CORPUS), *args,
    ]  # fmt: skip
    server.max_in_flight = 0
    calls_before, seen = server.chat_requests, len(server.timeline)
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"eval failed ({' '.join(args)}):\n{done.stderr[-3000:]}")
    result = json.loads((out / "results.json").read_text())
    timeline = server.timeline[seen:]
    nodes = {r.get("node") for r in result.get("examples", []) if r.get("node")}
    return {
        "eval_s": float(result["seconds"]),
        "command_s": wall,
        "calls": server.chat_requests - calls_before,
        # the server's view: first request received to last answer sent (the evaluation without its start-up)
        "span_s": max(end for _, end, _ in timeline) - min(start for start, _, _ in timeline),
        "peak": server.max_in_flight,
        "nodes": len(nodes) or 1,
        "errors": result["errors"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=64, help="examples")
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the server takes per request")
    parser.add_argument("--threads", type=int, default=4, help="examples in flight (per node under Ray)")
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    data = _data(base, args.n)
    t = args.threads
    rows = []
    with RayNodes(base, cpus=t + 2) as cluster, OpenAICompatServer(latency=args.latency) as server:
        env = dict(cluster.env, MEMENTO_LM_CACHE="false", MEMENTO_LM_API_KEY="bench", COLUMNS="200")
        ray = ("--executor", "ray", "--ray-address", cluster.address, "--threads", str(t))
        configs = [  # (label, in flight, LM limit, extra environment, arguments)
            (f"threads, 1 process, {t} in flight", t, None, {}, ("--threads", str(t))),
            (f"threads, 1 process, {2 * t} in flight", 2 * t, None, {}, ("--threads", str(2 * t))),
            (f"ray, 2 nodes x {t}, no LM limit", 2 * t, None, {}, ray),
            (f"ray, 2 nodes x {t}, lm limit {2 * t}", 2 * t, 2 * t, {"MEMENTO_LM_MAX_CONCURRENCY": str(2 * t)}, ray),
            (f"ray, 2 nodes x {t}, lm limit {t}", 2 * t, t, {"MEMENTO_LM_MAX_CONCURRENCY": str(t)}, ray),
        ]
        for i, (label, in_flight, limit, extra, argv) in enumerate(configs):
            row = _run(dict(env, **extra), server, data, base / f"out{i}", *argv)
            row.update(label=label, in_flight=in_flight, limit=limit)
            rows.append(row)
    baseline = rows[0]
    print(f"eval of {args.n} examples (closed_book: 1 LM call each), server latency {args.latency * 1000:.0f} ms")
    print(
        f"{'configuration':36} {'nodes':>5} {'eval s':>7} {'start-up s':>10} {'speed-up':>8} {'flowing':>7} "
        f"{'ideal':>6} {'overhead/call':>13} {'all-in/call':>11} {'peak':>5} {'limit':>6} {'command s':>9}"
    )
    for row in rows:
        slots = min(row["in_flight"], row["limit"] or row["in_flight"])
        ideal = slots / min(baseline["in_flight"], baseline["limit"] or baseline["in_flight"])
        speedup = baseline["eval_s"] / row["eval_s"]
        flowing = baseline["span_s"] / row["span_s"]  # the same without start-up (the server's spans)
        calls = max(1, row["calls"])
        # time each in-flight slot spent per LM call beyond the server's latency (the framework's share): while
        # requests flow (the server's first request to its last answer), and all in (the evaluation's seconds,
        # start-up included: workers importing and building the program, the budget actor)
        overhead = row["span_s"] * slots / calls - args.latency
        all_in = row["eval_s"] * slots / calls - args.latency
        limit = "-" if row["limit"] is None else str(row["limit"])
        print(
            f"{row['label']:36} {row['nodes']:5d} {row['eval_s']:7.2f} {row['eval_s'] - row['span_s']:10.2f} "
            f"{speedup:7.2f}x {flowing:6.2f}x {ideal:5.2f}x {overhead * 1000:10.1f} ms {all_in * 1000:8.1f} ms "
            f"{row['peak']:5d} {limit:>6} {row['command_s']:9.2f}"
        )
        if row["errors"]:
            print(f"  ({row['errors']} examples failed)")
    print(
        f"ideal: examples in flight (capped by the LM limit) over the threads run's {baseline['in_flight']}; "
        "peak: requests in flight at the server (its own count); start-up: eval s minus the server's span"
    )


if __name__ == "__main__":
    main()
