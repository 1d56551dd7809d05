"""Threads in one process vs the Ray executor on two nodes (issue 26): `memento eval` of 64 examples against a test
server that answers each request after 200 ms.

Each configuration is one `memento eval --method closed_book` (one LM call per example) in a subprocess; the two Ray
nodes are `ray start` processes on loopback addresses (memento.testing.RayNodes). Printed per configuration: the
evaluation's wall time (results.json ``seconds``: the examples only) and the command's (cluster start included),
the speed-up over threads beside the ideal for the configuration (examples in flight over threads' examples in flight,
capped by the LM limit), the framework overhead per LM call (the time each in-flight slot spent per call beyond the
server's latency), and the peak of requests in flight at the server against the configured limit.

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
    calls_before = server.chat_requests
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"eval failed ({' '.join(args)}):\n{done.stderr[-3000:]}")
    result = json.loads((out / "results.json").read_text())
    return {
        "eval_s": float(result["seconds"]),
        "command_s": wall,
        "calls": server.chat_requests - calls_before,
        "peak": server.max_in_flight,
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
    header = (
        f"{'configuration':34} {'eval s':>7} {'command s':>9} {'speed-up':>8} {'ideal':>6} {'overhead/call':>13} "
        f"{'peak':>5} {'limit':>6}"
    )
    print(header)
    for row in rows:
        slots = min(row["in_flight"], row["limit"] or row["in_flight"])
        ideal = slots / min(baseline["in_flight"], baseline["limit"] or baseline["in_flight"])
        speedup = baseline["eval_s"] / row["eval_s"]
        # time each in-flight slot spent per LM call beyond the server's latency: the framework's share
        overhead = row["eval_s"] * slots / max(1, row["calls"]) - args.latency
        limit = "-" if row["limit"] is None else str(row["limit"])
        print(
            f"{row['label']:34} {row['eval_s']:7.2f} {row['command_s']:9.2f} {speedup:7.2f}x {ideal:5.2f}x "
            f"{overhead * 1000:10.1f} ms {row['peak']:5d} {limit:>6}"
        )
        if row["errors"]:
            print(f"  ({row['errors']} examples failed)")


if __name__ == "__main__":
    main()
