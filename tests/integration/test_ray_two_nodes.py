"""A two-node Ray cluster on this machine (issue 26): a head and a second node started as separate processes with
`ray start` on loopback addresses, then `memento eval --executor ray --ray-address ...` across both.

Ray replaces 127.0.0.1 by the host's own address when a cluster may have several nodes, so the nodes bind to
127.0.0.2 and 127.0.0.3 (loopback too). Usage statistics are off, no dashboard, a small object store, a short temp
directory, a token of the test's own, 4 logical CPUs per node.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memento.testing import OpenAICompatServer, RayNodes

pytestmark = pytest.mark.slow

if os.environ.get("CI") != "true":
    pytest.importorskip("ray", reason="the [ray] extra is not installed")

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "examples" / "multihop" / "corpus.jsonl"
HEAD, SECOND = RayNodes.ADDRESSES


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayNodes]:
    with RayNodes(tmp_path_factory.mktemp("ray2")) as cluster:
        yield cluster


def _data(tmp_path: Path, n: int) -> Path:
    rows = [{"id": f"q{i}", "question": f"What is item number {i}?", "answers": [f"item {i}"]} for i in range(n)]
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _eval(cluster: RayNodes, tmp_path: Path, server: OpenAICompatServer, out: str, *more: str) -> dict:
    env = dict(cluster.env, MEMENTO_LM_CACHE="false", MEMENTO_LM_API_KEY="test-key", COLUMNS="200")
    cmd = [
        sys.executable, "-m", "memento.cli", "eval", "--task", "qa", "--data", str(_data(tmp_path, 16)),
        "--method", "closed_book", "--lm", "openai/x", "--api-base", server.api_base, "--out", str(tmp_path / out),
        "--corpus", str(CORPUS), *more,
    ]  # fmt: skip
    server.max_in_flight = 0
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / out / "results.json").read_text())
    result["peak"] = server.max_in_flight
    result["stderr"] = done.stderr
    return result


def _answers(result: dict) -> list:
    return [(e["index"], e["id"], e["prediction"], e["score"], e["error"]) for e in result["examples"]]


def test_eval_across_two_nodes_holds_the_limit_cluster_wide(two_nodes: RayNodes, tmp_path: Path) -> None:
    with OpenAICompatServer(latency=0.3) as server:
        threads = _eval(two_nodes, tmp_path, server, "threads", "--threads", "4")
        ray_args = ("--executor", "ray", "--ray-address", two_nodes.address, "--threads", "4")
        limited = _eval(two_nodes, tmp_path, server, "ray2", *ray_args, "--config", str(_limit(tmp_path, 2)))
        wide = _eval(two_nodes, tmp_path, server, "ray8", *ray_args, "--config", str(_limit(tmp_path, 8)))
    assert "2 nodes (127.0.0.2, 127.0.0.3), 4 examples in flight per node" in limited["stderr"], limited["stderr"]
    assert limited["peak"] == 2  # 8 examples in flight over two nodes, 2 requests at the server: one budget
    assert wide["peak"] > 2
    assert _answers(limited) == _answers(wide) == _answers(threads)
    for result in (limited, wide):
        assert result["provenance"]["executor"]["nodes"] == 2
        assert {e["node"] for e in result["examples"]} == {HEAD, SECOND}  # both nodes served some examples
        assert result["usage"]["lm_calls"] == threads["usage"]["lm_calls"] == 16


def _limit(tmp_path: Path, n: int) -> Path:
    path = tmp_path / f"limit{n}.toml"
    path.write_text(f"[lm]\nmax_concurrency = {n}\n", encoding="utf-8")
    return path


def test_a_sqlite_memory_is_refused_on_two_nodes_in_one_line(two_nodes: RayNodes, tmp_path: Path) -> None:
    env = dict(two_nodes.env, MEMENTO_LM_API_KEY="test-key")
    cmd = [
        sys.executable, "-m", "memento.cli", "train", "--task", "qa", "--data", str(_data(tmp_path, 2)),
        "--memory", str(tmp_path / "mem"), "--lm", "openai/x", "--api-base", "http://127.0.0.1:9/v1",
        "--embedder", "hashing", "--executor", "ray", "--ray-address", two_nodes.address,
    ]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.startswith("memento:") or "Error" in line]
    assert any("SQLite memory" in line and "2 nodes" in line for line in lines), done.stderr[-3000:]
    assert "Traceback" not in done.stderr


def test_train_and_eval_across_two_nodes_on_a_shared_postgresql_memory(
    two_nodes: RayNodes, tmp_path: Path, pg_location
) -> None:
    """`train` and `eval --method memento` across both nodes against one PostgreSQL memory: the memory equals the one
    a threads run trains, the answers equal the threads run's, and both nodes served examples."""
    sys.path.insert(0, str(ROOT / "tests"))
    from memento_training_fixture import make_engine, write_data

    corpus, data = write_data(tmp_path / "data")
    env = dict(
        two_nodes.env,
        MEMENTO_LM_CACHE="false",
        MEMENTO_LM_API_KEY="test-key",
        MEMENTO_WEB_CACHE_DIR=str(tmp_path / "webcache"),
        MEMENTO_BUDGETS_INITIAL_QUESTIONS="2",
        MEMENTO_BUDGETS_TOTAL_QUESTIONS="3",
        MEMENTO_BUDGETS_STEPS_PER_QUESTION="3",
        COLUMNS="200",
    )
    memories = {"threads": str(pg_location("threads")), "ray": str(pg_location("ray"))}
    ray_args = ["--executor", "ray", "--ray-address", two_nodes.address]
    with OpenAICompatServer(make_engine()) as server:
        common = ["--task", "multihop", "--data", str(data), "--corpus", str(corpus), "--threads", "2",
                  "--lm", "openai/scripted", "--api-base", server.api_base]  # fmt: skip
        for executor, memory in memories.items():
            cmd = [sys.executable, "-m", "memento.cli", "train", *common, "--memory", memory, "--batch-size", "3",
                   "--embedder", "hashing", *(ray_args if executor == "ray" else [])]  # fmt: skip
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, done.stderr[-3000:]
            if executor == "ray":
                assert "2 nodes (127.0.0.2, 127.0.0.3)" in done.stderr, done.stderr[-2000:]
        evals = {}
        for executor in ("threads", "ray"):
            out = tmp_path / f"eval-{executor}"
            where = ray_args if executor == "ray" else []
            cmd = [sys.executable, "-m", "memento.cli", "eval", *common, "--method", "memento",
                   "--memory", memories["ray"], "--out", str(out), *where]  # fmt: skip
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, done.stderr[-3000:]
            evals[executor] = json.loads((out / "results.json").read_text())
    cmd = [sys.executable, "-m", "memento.cli", "memory", "diff", "--memory", memories["ray"],
           "--against", memories["threads"]]  # fmt: skip
    diff = subprocess.run(
        cmd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert diff.returncode == 0 and "same contents" in diff.stdout, diff.stdout[-3000:] + diff.stderr[-2000:]
    assert _answers(evals["ray"]) == _answers(evals["threads"])
    assert {e["node"] for e in evals["ray"]["examples"]} == {HEAD, SECOND}
    assert evals["ray"]["provenance"]["executor"]["nodes"] == 2
