"""Seeing what a command did: the LM call log, progress on stderr, ``--json`` output, the report hint."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from memento.cli import app
from memento.testing import OpenAICompatServer, ScriptedEngine

REPO = Path(__file__).resolve().parents[2]
QUESTIONS = REPO / "examples" / "multihop" / "questions.jsonl"
CORPUS = REPO / "examples" / "multihop" / "corpus.jsonl"


def _questions(tmp_path: Path, n: int = 3) -> tuple[Path, list[dict]]:
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines()[:n]]
    path = tmp_path / "questions.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path, rows


def _eval_args(data: Path, server: OpenAICompatServer, out: Path, *extra: str) -> list[str]:
    return [
        "eval", "--task", "multihop", "--data", str(data), "--method", "closed_book", "--lm", "openai/x",
        "--api-base", server.api_base, "--threads", "1", "--out", str(out), *extra,
    ]  # fmt: skip


def test_eval_log_lm_one_line_per_server_request(tmp_path: Path) -> None:
    data, rows = _questions(tmp_path)
    engine = ScriptedEngine()
    # a completion carrying URL credentials: the log must not keep them
    engine.overrides["answer"] = lambda call: f"see http://alice:hunter22@example.org/x for {call.index}"
    log = tmp_path / "logs" / "calls.jsonl"
    with OpenAICompatServer(engine) as server:
        result = CliRunner().invoke(
            app,
            _eval_args(data, server, tmp_path / "out", "--log-lm", str(log)),
            env={"MEMENTO_LM_CACHE": "false", "COLUMNS": "120"},
        )
        requests = [r for r in server.requests if r["path"].endswith("/chat/completions")]
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert len(requests) == 3
    assert len(lines) == len(requests)
    sent = sorted(r["body"]["messages"][-1]["content"] for r in requests)
    assert sorted(line["messages"][-1]["content"] for line in lines) == sent
    for line in lines:
        assert line["role"] == "lm" and line["model"] == "openai/x"
        assert line["stage"] == "answer" and line["predictor"]  # the stage and the predictor's signature
        assert line["messages"][0]["role"] == "system" and line["messages"][-1]["role"] == "user"
        assert "example.org/x" in json.loads(line["completion"])["answer"]  # the JSON adapter's reply
        assert line["parsed"] is True and line["parse_error"] is None  # each reply parsed into the signature
        assert "hunter22" not in json.dumps(line)
        assert line["cached"] is False and line["retries"] == [] and line["error"] is None
        assert line["tokens"]["prompt"] > 0 and line["tokens"]["completion"] > 0 and line["latency_s"] > 0
    assert any(row["question"] in lines[0]["messages"][-1]["content"] for row in rows)
    assert f"3 LM calls logged to {log}" in result.stderr


def test_log_lm_records_retries_and_cache_hits(tmp_path: Path, caplog) -> None:
    import logging

    import dspy

    from memento.records.lm_log import LMCallLog

    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=True)  # the next test's fixture resets it
    log_path = tmp_path / "calls.jsonl"
    with OpenAICompatServer(ScriptedEngine(overrides={"answer": "Paris"}), status_sequence=[429]) as server:
        lm = dspy.LM("openai/x", api_base=server.api_base, api_key="k", cache=True, num_retries=2)
        predict = dspy.Predict("question -> answer")
        with caplog.at_level(logging.INFO, logger="memento.records.lm_log"), LMCallLog(log_path) as log:
            assert predict(question="capital of France?", lm=lm).answer == "Paris"
            assert predict(question="capital of France?", lm=lm).answer == "Paris"  # served by DSPy's cache
        assert len(server.requests) == 2  # the 429, then the answer
    first, second = LMCallLog.read(log_path)
    assert log.lines == 2
    assert first["cached"] is False and len(first["retries"]) == 1
    assert "429" in first["retries"][0]["error"] and first["retries"][0]["attempt"] == 1
    assert second["cached"] is True and second["tokens"] == {"prompt": 0, "completion": 0, "cached_prompt": 0}
    assert any("LM call retry 1" in r.getMessage() for r in caplog.records)


def test_eval_progress_on_a_forced_terminal_and_json_output(tmp_path: Path) -> None:
    data, _ = _questions(tmp_path)
    engine = ScriptedEngine(overrides={"answer": "novelist"}, delay=0.6)  # a slow server: the bar refreshes
    with OpenAICompatServer(engine) as server:
        result = CliRunner().invoke(
            app,
            _eval_args(data, server, tmp_path / "out", "--json"),
            env={"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "TERM": "xterm", "COLUMNS": "120"},
        )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)  # stdout holds the JSON document and nothing else
    assert payload["n"] == 3 and payload["mean"] == 1.0 / 3
    assert payload["path"] == str(tmp_path / "out" / "results.json")
    assert payload["report"] == f"memento report {tmp_path / 'out'}"
    assert all("trajectory" not in row for row in payload["examples"])
    err = result.stderr
    assert "eval closed_book" in err and "\x1b[" in err  # drawn as a live terminal display
    assert "1/3" in err and "2/3" in err and "3/3" in err
    assert "mean 1.000" in err and "mean 0.333" in err  # the running mean, as the examples finish
    assert "0:00:0" in err and "eta" in err


def test_eval_prints_report_command(tmp_path: Path) -> None:
    data, _ = _questions(tmp_path, 1)
    with OpenAICompatServer(ScriptedEngine()) as server:
        result = CliRunner().invoke(app, _eval_args(data, server, tmp_path / "out"), env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert f"report: memento report {tmp_path / 'out'}" in result.stdout


_TERMINAL = {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "TERM": "xterm", "COLUMNS": "160"}


def test_run_live_status_line_and_json(tmp_path: Path) -> None:
    engine = ScriptedEngine(delay=0.15)
    engine.when("sub_questions", sub_questions=["Who is John Lanchester?", "Who is Alan Dean Foster?"])
    engine.when("next_action", next_action="finish", next_thought="done", next_args={})
    out = tmp_path / "t.json"
    with OpenAICompatServer(engine) as server:
        result = CliRunner().invoke(
            app,
            [
                "run", "--task", "multihop", "--question", "What profession do they share?", "--method", "aet",
                "--corpus", str(CORPUS), "--lm", "openai/x", "--api-base", server.api_base, "--out", str(out),
                "--initial-questions", "2", "--total-questions", "2", "--steps-per-question", "2", "--threads", "1",
                "--json",
            ],
            env=_TERMINAL,
        )  # fmt: skip
        requests = server.chat_requests
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["trajectory"] == str(out) and out.exists()
    assert payload["report"] == f"memento report {out}" and payload["sub_questions"] == 2
    assert payload["usage"]["lm_calls"] == requests
    err = result.stderr
    assert "run aet" in err and "wave 0" in err and "stage decompose" in err and "stage solve" in err
    assert "2 sub-questions" in err and f"{requests} LM calls" in err


def test_compare_progress_per_method_and_phase(tmp_path: Path) -> None:
    data, _ = _questions(tmp_path, 6)
    engine = ScriptedEngine(overrides={"answer": "novelist"}, delay=0.1)
    with OpenAICompatServer(engine) as server:
        result = CliRunner().invoke(
            app,
            [
                "compare", "--task", "multihop", "--data", str(data), "--n-train", "3", "--n-test", "3",
                "--methods", "closed_book,bootstrap:closed_book", "--budget", "tiny", "--out", str(tmp_path / "cmp"),
                "--lm", "openai/x", "--api-base", server.api_base, "--threads", "1", "--embedder", "hashing",
            ],
            env={**_TERMINAL, "MEMENTO_LM_CACHE": "false"},
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    err = result.stderr
    assert "closed_book · test" in err and "bootstrap:closed_book · train" in err
    assert "bootstrap:closed_book · test" in err
    assert "3/3" in err and "mean" in err and "LM calls" in err and "eta" in err
    assert f"report: memento report {tmp_path / 'cmp'}" in result.stdout


def test_corpus_search_and_memory_stats_json(tmp_path: Path) -> None:
    from memento.memory.embedder import HashingEmbedder
    from memento.memory.memento_memory import MementoMemory

    runner = CliRunner()
    result = runner.invoke(app, ["corpus", "search", str(CORPUS), "John Lanchester novelist", "-k", "2", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["query"] == "John Lanchester novelist" and payload["documents"] > 2
    assert len(payload["results"]) == 2 and {"url", "title", "snippet"} <= set(payload["results"][0])

    memory = tmp_path / "mem"
    MementoMemory(memory, embedder=HashingEmbedder())
    result = runner.invoke(app, ["memory", "stats", "--memory", str(memory), "--json"])
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    assert stats["directory"] == str(memory) and stats["version"] == 0
    assert stats["craft"]["entries"] == 0 and isinstance(stats["versions"], list)


def test_retries_are_logged_at_info_without_a_call_log(tmp_path: Path, caplog) -> None:
    import logging

    data, _ = _questions(tmp_path, 1)
    with OpenAICompatServer(ScriptedEngine(), status_sequence=[503]) as server:
        # -v makes INFO visible on the console; caplog stands in for that handler here
        with caplog.at_level(logging.INFO, logger="memento.records.lm_log"):
            result = CliRunner().invoke(app, _eval_args(data, server, tmp_path / "out"), env={"COLUMNS": "200"})
        assert len(server.requests) == 2  # the 503, then the answer
    assert result.exit_code == 0, result.output
    (record,) = [r for r in caplog.records if r.name == "memento.records.lm_log"]
    assert record.levelno == logging.INFO and "LM call retry 1 after" in record.getMessage()
    assert "503" in record.getMessage()
