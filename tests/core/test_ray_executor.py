"""The Ray executor (issue 26) on a local single-node cluster started by each command.

`memento eval --executor ray` gives the threads executor's results on a deterministic test server, holds the LM
limit across its processes, logs every LM call at the driver, records the executor and the node of each example,
stops on SIGINT (exit 130) keeping what finished, and a rerun finishes only the rest. `memento train --executor ray`
leaves the same memory as a threads run (`memory diff --against` empty). A SQLite memory is refused on a cluster of
several nodes. The two-node cluster is tests/integration/test_ray_two_nodes.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memento.testing import OpenAICompatServer

pytestmark = pytest.mark.slow

if os.environ.get("CI") != "true":
    pytest.importorskip("ray", reason="the [ray] extra is not installed")

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "examples" / "multihop" / "corpus.jsonl"
sys.path.insert(0, str(ROOT / "tests"))  # the shared training fixture
from memento_training_fixture import make_engine, write_data  # noqa: E402

_CLOCKS = ("seconds", "created_at", "started_at", "ended_at", "latency_s", "time", "node")


def _data(tmp_path: Path, n: int) -> Path:
    rows = [{"id": f"q{i}", "question": f"What is item number {i}?", "answers": [f"item {i}"]} for i in range(n)]
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMENTO_", "RAY_"))}
    env.update(
        MEMENTO_LM_CACHE="false",
        MEMENTO_LM_API_KEY="test-key",
        MEMENTO_RUN_RAY_CPUS="4",
        DSPY_CACHEDIR=str(tmp_path / "dspy-cache"),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HF_HUB_OFFLINE="1",
        COLUMNS="200",
        **extra,
    )
    return env


def _eval(data: Path, out: Path, server: OpenAICompatServer, executor: str, *more: str) -> list[str]:
    return [
        sys.executable, "-m", "memento.cli", "eval", "--task", "qa", "--data", str(data), "--method", "closed_book",
        "--lm", "openai/x", "--api-base", server.api_base, "--out", str(out), "--corpus", str(CORPUS),
        "--executor", executor, *more,
    ]  # fmt: skip


def _plain(value):
    """A result without clocks, durations and where it ran (what may differ between two equal runs)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k not in _CLOCKS and k != "provenance"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def test_eval_on_ray_equals_threads_holds_the_limit_and_logs_at_the_driver(tmp_path: Path) -> None:
    data = _data(tmp_path, 8)
    env = _env(tmp_path, MEMENTO_LM_MAX_CONCURRENCY="2")
    with OpenAICompatServer(latency=0.3) as server:
        runs = {}
        for executor in ("threads", "ray"):
            server.max_in_flight = 0
            cmd = _eval(data, tmp_path / executor, server, executor, "--threads", "4",
                        "--log-lm", str(tmp_path / f"{executor}.jsonl"))  # fmt: skip
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, done.stderr[-3000:]
            runs[executor] = (json.loads((tmp_path / executor / "results.json").read_text()), server.max_in_flight)
            if executor == "ray":
                assert "forward passes on a local Ray cluster: 1 node (127.0.0.1)" in done.stderr, done.stderr
                assert "lm 2 in flight" in done.stderr
    (threads, threads_peak), (ray, ray_peak) = runs["threads"], runs["ray"]
    assert threads_peak == 2 and ray_peak == 2  # 4 examples in flight, the role's limit held by the budget actor
    assert _plain(ray) == _plain(threads)
    assert ray["usage"]["lm_calls"] == threads["usage"]["lm_calls"] == 8
    assert ray["provenance"]["executor"] == {
        "executor": "ray",
        "nodes": 1,
        "node_addresses": ["127.0.0.1"],
        "ray_address": "local",
        "threads_per_node": 4,
    }
    assert threads["provenance"]["executor"]["executor"] == "threads"
    assert {e["node"] for e in ray["examples"]} == {"127.0.0.1"}
    assert {e["node"] for e in threads["examples"]} == {None}
    # every worker's LM call reached the driver's --log-lm file, as the threads run's did
    logged = {ex: [json.loads(line) for line in (tmp_path / f"{ex}.jsonl").read_text().splitlines()] for ex in runs}
    assert len(logged["ray"]) == len(logged["threads"]) == 8
    key = lambda r: json.dumps(r["messages"], sort_keys=True)  # noqa: E731
    assert sorted(map(key, logged["ray"])) == sorted(map(key, logged["threads"]))
    assert {r["role"] for r in logged["ray"]} == {"lm"}


def test_sigint_during_a_ray_eval_exits_130_and_a_rerun_finishes_the_rest(tmp_path: Path) -> None:
    data, out = _data(tmp_path, 16), tmp_path / "out"
    env = _env(tmp_path)
    with OpenAICompatServer(latency=1.0) as server:
        cmd = _eval(data, out, server, "ray", "--threads", "2")
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while server.chat_requests < 4 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.communicate()
        at_signal = server.chat_requests
        proc.send_signal(signal.SIGINT)
        sent = time.monotonic()
        _out, err = proc.communicate(timeout=60)
        seconds = time.monotonic() - sent
        assert proc.returncode == 130, err[-3000:]
        assert seconds < 10, seconds
        assert "cancelled by SIGINT" in err and "Traceback" not in err, err[-3000:]
        # the examples in flight (2) may still ask once each; queued ones never started
        assert server.chat_requests <= at_signal + 2, (server.chat_requests, at_signal)
        saved = json.loads((out / "results.json").read_text())
        assert saved["complete"] is False and 0 < saved["n"] < 16
        finished = {e["id"] for e in saved["examples"] if not e["error"]}
        # the driver journaled every example a worker finished, as it came back
        journal = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
        assert journal[0]["memento_journal"] == 1 and journal[0]["run_key"] == saved["run_key"]
        journaled = {line["example"]["id"]: line["example"] for line in journal[1:]}
        assert {i for i, e in journaled.items() if not e["error"]} == finished
        assert {e["node"] for e in journaled.values()} == {"127.0.0.1"}  # run on the worker, written by the driver
        (out / "results.json").unlink()  # as if the driver had been killed (SIGKILL): only the journal is left

        before = server.chat_requests
        server.latency = 0.0
        rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        final = json.loads((out / "results.json").read_text())
        assert final["complete"] is True and final["n"] == 16 and final["resumed"] == len(finished)
        assert server.chat_requests - before == 16 - len(finished)  # only the missing examples ran
        assert not (out / "journal.jsonl").exists()  # every example is in the complete results.json
        by_id = {e["id"]: e for e in final["examples"]}
        assert all(by_id[i]["prediction"] == journaled[i]["prediction"] for i in finished)


def test_the_lm_deadline_holds_on_ray_workers_and_the_driver_journals_what_finished(tmp_path: Path) -> None:
    data, out = _data(tmp_path, 6), tmp_path / "out"
    env = _env(tmp_path, MEMENTO_LM_DEADLINE="3", MEMENTO_LM_NUM_RETRIES="0")
    with OpenAICompatServer(hang_after=3) as server:  # answers 3 requests, then never again
        cmd = _eval(data, out, server, "ray", "--threads", "1")
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    # the worker's call ended at its role's deadline: the run stops with the one-line reason, keeping what finished
    assert done.returncode != 0, done.stderr[-3000:]
    assert "no answer within its deadline of 3 s" in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]
    saved = json.loads((out / "results.json").read_text())
    assert saved["complete"] is False and saved["n"] == 3
    journal = [json.loads(line) for line in (out / "journal.jsonl").read_text().splitlines()]
    assert [line["example"]["id"] for line in journal[1:]] == ["q0", "q1", "q2"]
    assert {line["example"]["node"] for line in journal[1:]} == {"127.0.0.1"}


def _train(data: Path, corpus: Path, memory: Path, server: OpenAICompatServer, executor: str) -> list[str]:
    return [
        sys.executable, "-m", "memento.cli", "train",
        "--task", "multihop", "--data", str(data), "--memory", str(memory), "--batch-size", "3",
        "--corpus", str(corpus), "--threads", "1", "--embedder", "hashing",
        "--lm", "openai/scripted", "--api-base", server.api_base, "--executor", executor,
    ]  # fmt: skip


def test_train_on_ray_leaves_the_memory_a_threads_run_leaves(tmp_path: Path) -> None:
    corpus, data = write_data(tmp_path / "data")
    env = _env(
        tmp_path,
        MEMENTO_WEB_CACHE_DIR=str(tmp_path / "webcache"),
        MEMENTO_BUDGETS_INITIAL_QUESTIONS="2",
        MEMENTO_BUDGETS_TOTAL_QUESTIONS="3",
        MEMENTO_BUDGETS_STEPS_PER_QUESTION="3",
    )
    with OpenAICompatServer(make_engine()) as server:
        for executor in ("threads", "ray"):
            cmd = _train(data, corpus, tmp_path / executor, server, executor)
            cmd += ["--log-lm", str(tmp_path / f"{executor}.jsonl")]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, done.stderr[-3000:]
            assert "MEMENTO training batches" in done.stdout
            assert ("forward passes on a local Ray cluster" in done.stderr) == (executor == "ray"), done.stderr
    diff = subprocess.run(
        [
            sys.executable,
            "-m",
            "memento.cli",
            "memory",
            "diff",
            "--memory",
            str(tmp_path / "ray"),
            "--against",
            str(tmp_path / "threads"),
        ],  # fmt: skip
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert diff.returncode == 0, diff.stdout[-3000:] + diff.stderr[-2000:]
    assert "same contents" in diff.stdout
    # the same prompts were sent (forward passes on the workers, distillers on the driver), each logged once; with
    # one thread a run's sub-questions finish in one order (in parallel, session memory lists them as they finish)
    logged = {ex: (tmp_path / f"{ex}.jsonl").read_text().splitlines() for ex in ("threads", "ray")}
    calls = {ex: sorted(json.dumps([json.loads(line)[k] for k in ("role", "stage", "messages")]) for line in lines)
             for ex, lines in logged.items()}  # fmt: skip
    assert len(calls["ray"]) == len(calls["threads"]) > 20
    assert calls["ray"] == calls["threads"]


def test_a_sqlite_memory_is_refused_on_a_cluster_of_several_nodes(tmp_path: Path) -> None:
    from memento.core.config import Settings
    from memento.core.errors import ConfigError
    from memento.execution.ray_cluster import RayNode
    from memento.execution.ray_executor import RayExecutor

    executor = RayExecutor(Settings())
    executor.nodes = [RayNode("a", "127.0.0.2", 4), RayNode("b", "127.0.0.3", 4)]
    with pytest.raises(ConfigError) as refused:
        executor.check_memory(tmp_path / "mem")
    assert str(refused.value).count("\n") == 0
    assert "SQLite memory" in str(refused.value) and "2 nodes" in str(refused.value)
    executor.check_memory("postgresql://memento@127.0.0.1:5432/team")  # shared: allowed
    executor.nodes = executor.nodes[:1]
    executor.check_memory(tmp_path / "mem")  # one node: allowed


def test_compare_on_ray_equals_threads(tmp_path: Path) -> None:
    """A comparison's test phases (a saved program state shipped to the workers, memories read by location) and
    MEMENTO's training forward passes on the cluster: the threads run's results and memories. "LLM + Memento" and
    "5-shot + Memento" (closed_book_memory, few_shot_memory) read the memory memento trained on the workers too."""
    from commands.test_replay import VOLATILE, _data, _engine  # the replay test's deterministic comparison

    from memento.memory.item_record import normalise

    questions, corpus, gold = _data(tmp_path)
    env = _env(tmp_path)
    args = [
        sys.executable, "-m", "memento.cli", "compare", "--task", "multihop", "--data", str(questions),
        "--methods", "closed_book,memento,closed_book_memory,few_shot_memory,bootstrap:closed_book,jitmem",
        "--n-train", "2", "--n-test", "2",
        "--budget", "tiny", "--corpus", str(corpus), "--lm", "openai/x", "--threads", "1", "--embedder", "hashing",
    ]  # fmt: skip
    for executor in ("threads", "ray"):  # a server each: its replies number the calls it answered
        with OpenAICompatServer(_engine(gold)) as server:
            cmd = [*args, "--api-base", server.api_base, "--out", str(tmp_path / executor), "--executor", executor]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    drop = VOLATILE | {"node", "wall_seconds"}
    methods = ("closed_book", "memento", "closed_book_memory", "few_shot_memory", "bootstrap-closed_book", "jitmem")
    for name in ("results.json", *(f"{m}/test/results.json" for m in methods)):
        assert (tmp_path / "threads" / name).exists(), name
        left = normalise(json.loads((tmp_path / "threads" / name).read_text()), drop=drop)
        right = normalise(json.loads((tmp_path / "ray" / name).read_text()), drop=drop)
        assert left == right, name
    ray_tested = json.loads((tmp_path / "ray" / "memento" / "test" / "results.json").read_text())
    assert {e["node"] for e in ray_tested["examples"]} == {"127.0.0.1"}
    for baseline in ("closed_book_memory", "few_shot_memory"):  # tested on the workers, over memento's memory
        tested = json.loads((tmp_path / "ray" / baseline / "test" / "results.json").read_text())
        assert tested["errors"] == 0 and {e["node"] for e in tested["examples"]} == {"127.0.0.1"}
    report = json.loads((tmp_path / "ray" / "results.json").read_text())
    assert report["provenance"]["executor"]["executor"] == "ray"
    assert report["methods"]["memento"]["costs"]["train"]["lm_calls"] > 0
    for method in ("memento", "jitmem"):
        this, other = tmp_path / "ray" / method / "memory", tmp_path / "threads" / method / "memory"
        diff = subprocess.run(
            [sys.executable, "-m", "memento.cli", "memory", "diff", "--memory", str(this), "--against", str(other)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert diff.returncode == 0, diff.stdout[-3000:]


def test_jitmem_stream_batches_on_ray_equal_threads(tmp_path: Path) -> None:
    """JitMem's test stream: each batch's tasks on the workers over the bank at the batch's version, their offers
    added to the bank by the driver; the same scores, stream summary and banks as threads."""
    from commands.test_replay import VOLATILE, _data, _engine

    from memento.memory.item_record import normalise

    questions, corpus, gold = _data(tmp_path)
    env = _env(tmp_path)
    args = [
        sys.executable, "-m", "memento.cli", "eval", "--task", "multihop", "--data", str(questions),
        "--method", "jitmem", "--jitmem-protocol", "stream", "--orderings", "2", "--stream-batch", "2",
        "--corpus", str(corpus), "--lm", "openai/x", "--threads", "1",
    ]  # fmt: skip
    for executor in ("threads", "ray"):
        with OpenAICompatServer(_engine(gold)) as server:
            cmd = [*args, "--api-base", server.api_base, "--out", str(tmp_path / executor), "--executor", executor]
            done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
            assert ("forward passes on a local Ray cluster" in done.stderr) == (executor == "ray")
    drop = VOLATILE | {"node"}
    for name in ("results.json", "stream.json"):
        left = normalise(json.loads((tmp_path / "threads" / name).read_text()), drop=drop)
        right = normalise(json.loads((tmp_path / "ray" / name).read_text()), drop=drop)
        assert left == right, name
    summary = json.loads((tmp_path / "ray" / "stream.json").read_text())
    assert summary["per_ordering"][0]["bank_end"] > 0  # the driver stored what the workers' agents offered
    for ordering in (1, 2):
        bank = f"ordering-{ordering}/memory"
        cmd = [sys.executable, "-m", "memento.cli", "memory", "diff", "--memory", str(tmp_path / "ray" / bank),
               "--against", str(tmp_path / "threads" / bank)]  # fmt: skip
        diff = subprocess.run(
            cmd,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert diff.returncode == 0, diff.stdout[-3000:]
