"""Replay (issue 21 item 4): a command's LM calls served from an earlier run's ``--log-lm`` file, with no server.

Done means: record with a test server, then ``--replay-lm`` with the server stopped gives an identical results.json
(timings aside) and an empty ``memory diff --against`` between the two memories.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import dspy
import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.memory.item_record import normalise
from memento.testing import OpenAICompatServer, ScriptedEngine

#: What differs between two runs that did the same work: clocks, durations, where they wrote (the eval command that
#: reloads an artefact names its directory) and the provenance of the command line (its --log-lm / --replay-lm).
VOLATILE = frozenset(
    {"created_at", "started_at", "finished_at", "ended_at", "seconds", "wall_seconds", "timings", "ms", "artefacts"}
    | {"provenance"}
)


def _data(tmp_path: Path, n: int = 4) -> tuple[Path, Path, dict[str, str]]:
    questions, corpus, gold = tmp_path / "q.jsonl", tmp_path / "corpus.jsonl", {}
    rows, docs = [], []
    for i in range(n):
        person, town = f"Person{i}", f"Town{i}"
        question = f"In which town was the founder of Company{i} born?"
        rows.append({"id": f"syn-{i}", "question": question, "answers": [town]})
        docs += [
            {"url": f"https://ex.org/c{i}", "title": f"Company{i}", "text": f"Company{i} was founded by {person}."},
            {"url": f"https://ex.org/p{i}", "title": person, "text": f"{person} was born in {town}."},
        ]
        gold[question] = town
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return questions, corpus, gold


def _engine(gold: dict[str, str]) -> ScriptedEngine:
    def searched(call: Any) -> bool:
        return "observation_0" in call.inputs

    def urls(text: str) -> list[str]:
        return list(dict.fromkeys(re.findall(r"https://ex\.org/[a-z0-9]+", text)))

    def facts(call: Any) -> list[dict[str, Any]]:  # M4 facts cite a page the run was shown (else none is stored)
        found = urls(call.inputs.get("findings", ""))
        return [{"entity": "Company", "fact": f"A company page is {found[0]}.", "sources": found[:1]}] if found else []

    return ScriptedEngine(
        overrides={
            "answer": lambda call: gold.get(call.inputs.get("question", ""), f"answer {call.index}"),
            "next_tool_name": lambda call: "finish" if searched(call) else "search_web",
            "next_tool_args": lambda call: (
                {} if searched(call) else {"query": (call.inputs.get("task") or call.inputs.get("question", ""))[:80]}
            ),
            # the distillers write something to every store, whatever adapter formats the replies
            "insights": ["Search the company's name first, then its founder's."],
            "operations": [{"op": "add", "text": "Quote the exact company name.", "reason": "it found the page"}],
            "sources": lambda call: urls(call.prompt)[:1],
            "facts": facts,
        }
    )


def _same(a: Path, b: Path) -> None:
    """Two results files are equal but for clocks, durations, paths and random ids."""
    left = normalise(json.loads(a.read_text(encoding="utf-8")), drop=VOLATILE)
    right = normalise(json.loads(b.read_text(encoding="utf-8")), drop=VOLATILE)
    assert left == right, a


def _same_lines(a: Path, b: Path) -> None:
    """Two JSONL files (trajectories) are equal line by line but for clocks, durations, paths and random ids."""
    left, right = (a.read_text(encoding="utf-8").splitlines(), b.read_text(encoding="utf-8").splitlines())
    assert left and len(left) == len(right), a
    for x, y in zip(left, right, strict=True):
        assert normalise(json.loads(x), drop=VOLATILE) == normalise(json.loads(y), drop=VOLATILE), a


def test_a_comparison_replayed_with_the_server_stopped_gives_the_same_results_and_memories(tmp_path: Path) -> None:
    questions, corpus, gold = _data(tmp_path)
    log = tmp_path / "calls.jsonl"
    runner = CliRunner()
    args = [
        "compare", "--task", "multihop", "--methods", "closed_book,memento,jitmem,cbr", "--data", str(questions),
        "--n-train", "2", "--n-test", "2", "--budget", "tiny", "--corpus", str(corpus), "--lm", "openai/x",
        "--threads", "1", "--embedder", "hashing",
    ]  # fmt: skip
    with OpenAICompatServer(_engine(gold)) as server:
        recorded = runner.invoke(app, [*args, "--out", str(tmp_path / "A"), "--api-base", server.api_base,
                                       "--log-lm", str(log)])  # fmt: skip
        api_base, requests = server.api_base, server.chat_requests
    assert recorded.exit_code == 0, recorded.output
    calls = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert len(calls) == requests > 20
    assert {c["role"] for c in calls} >= {"lm", "judge_lm", "reflection_lm"}

    # the server is stopped: every reply now comes from the log
    replayed = runner.invoke(app, [*args, "--out", str(tmp_path / "B"), "--api-base", api_base,
                                   "--replay-lm", str(log)])  # fmt: skip
    assert replayed.exit_code == 0, replayed.output
    assert f"replaying LM calls from {log} ({len(calls)} logged calls" in replayed.stderr
    assert f"{len(calls)} LM calls replayed from {log}" in replayed.stderr
    assert "not asked for" not in replayed.stderr
    _same(tmp_path / "A" / "results.json", tmp_path / "B" / "results.json")
    for method in ("closed_book", "memento", "jitmem", "cbr"):
        _same(tmp_path / "A" / method / "test" / "results.json", tmp_path / "B" / method / "test" / "results.json")
        _same_lines(tmp_path / "A" / method / "test" / "trajectories.jsonl",
                    tmp_path / "B" / method / "test" / "trajectories.jsonl")  # fmt: skip
    usage = json.loads((tmp_path / "B" / "results.json").read_text())["methods"]["memento"]["costs"]["train"]
    assert usage["lm_calls"] > 0  # the replayed calls are billed as they were

    for method, stores in (("memento", ("M1", "M2", "M3", "M4")), ("jitmem", ("trajectories",)),
                           ("cbr", ("cases", "gate_pairs"))):  # fmt: skip
        this, other = tmp_path / "A" / method / "memory", tmp_path / "B" / method / "memory"
        result = runner.invoke(app, ["memory", "diff", "--memory", str(this), "--against", str(other), "--json"])
        assert result.exit_code == 0, result.output
        diff = json.loads(result.stdout)
        assert diff["same"] is True and set(diff["stores"]) == set(stores), diff
        assert all(s["this"] == s["other"] > 0 for s in diff["stores"].values()), diff


def test_a_call_the_log_does_not_hold_stops_the_run_with_one_line(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    runner = CliRunner()
    args = ["run", "--method", "closed_book", "--task", "qa", "--lm", "openai/x", "--out", str(tmp_path / "t.json")]
    with OpenAICompatServer(ScriptedEngine(overrides={"answer": "Frank Herbert"})) as server:
        result = runner.invoke(app, [*args, "--api-base", server.api_base, "--question", "Who wrote Dune?",
                                     "--log-lm", str(log)])  # fmt: skip
    assert result.exit_code == 0, result.output
    again = runner.invoke(app, [*args, "--question", "Who wrote Dune?", "--replay-lm", str(log)])
    assert again.exit_code == 0, again.output
    assert "answer: Frank Herbert" in again.stdout  # no --api-base, no key: the log answers
    other = runner.invoke(app, [*args, "--question", "Who wrote Emma?", "--replay-lm", str(log)])
    assert other.exit_code == 1
    errors = [line for line in other.stderr.splitlines() if line.startswith("memento: error")]
    assert errors == [
        f"memento: error: --replay-lm: no logged LM call for stage answer, predictor AnswerQuestionClosedBook, role lm "
        f"(openai/x) in {log}: this run's prompts differ from the logged run's"
    ]
    assert "Traceback" not in other.output


def test_a_bad_log_file_is_refused_before_any_call(tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["run", "--method", "closed_book", "--task", "qa", "--lm", "openai/x", "--question", "q"]
    missing = runner.invoke(app, [*args, "--replay-lm", str(tmp_path / "none.jsonl")])
    assert missing.exit_code == 1 and "does not exist (write one with --log-lm)" in missing.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "lm"}\n', encoding="utf-8")
    refused = runner.invoke(app, [*args, "--replay-lm", str(bad)])
    assert refused.exit_code == 1
    assert f"{bad} line 1 is not an LM call record of --log-lm" in refused.stderr


def test_calls_cached_when_logged_are_replayed_unbilled_and_others_with_their_tokens(tmp_path: Path) -> None:
    from memento.core.config import load_settings
    from memento.llm.lm import configure
    from memento.records.lm_log import LMCallLog
    from memento.records.usage import UsageMeter

    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=True)  # the next test's fixture resets it
    log = tmp_path / "calls.jsonl"
    with OpenAICompatServer(ScriptedEngine(overrides={"answer": "Paris"})) as server:
        roles = configure(load_settings(flags={"lm": {"model": "openai/x", "api_base": server.api_base}}))
        predict = dspy.Predict("question -> answer")
        with LMCallLog(log, roles=roles), UsageMeter(roles) as meter:
            for _ in range(2):  # the second is served by DSPy's cache
                assert predict(question="capital of France?", lm=roles.lm).answer == "Paris"
    recorded = meter.usage()
    assert (recorded.lm_calls, recorded.cached_lm_calls) == (1, 1) and recorded.prompt_tokens > 0

    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    settings = load_settings(flags={"lm": {"model": "openai/x"}, "observe": {"replay_lm": str(log)}})
    roles = configure(settings)
    with UsageMeter(roles) as meter:
        for _ in range(2):
            assert predict(question="capital of France?", lm=roles.lm).answer == "Paris"
    replayed = meter.usage()
    assert replayed.model_dump() == recorded.model_dump()
    with pytest.raises(Exception, match="all served already"):
        predict(question="capital of France?", lm=roles.lm)


def test_a_logged_failure_is_replayed_as_the_same_error(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    runner = CliRunner()
    args = ["run", "--method", "closed_book", "--task", "qa", "--lm", "openai/x", "--question", "Who wrote Dune?"]
    env = {"MEMENTO_LM_NUM_RETRIES": "0"}
    with OpenAICompatServer(ScriptedEngine(), always_status=401) as server:
        failed = runner.invoke(app, [*args, "--api-base", server.api_base, "--log-lm", str(log)], env=env)
    assert failed.exit_code == 1
    again = runner.invoke(app, [*args, "--replay-lm", str(log)])
    assert again.exit_code == 1

    def error(output: str) -> list[str]:
        return [line for line in output.splitlines() if line.startswith("memento: error")]

    assert error(again.stderr) == error(failed.stderr) and "refused the API key" in error(failed.stderr)[0]


def test_memory_diff_against_names_what_only_one_memory_holds(tmp_path: Path) -> None:
    from memento.memory.memento_memory import MementoMemory

    for name, rules in (("a", ["Quote exact titles."]), ("b", ["Quote exact titles.", "Prefer official sources."])):
        with MementoMemory(tmp_path / name) as memory, memory.transaction(batch=1) as tx:
            for text in rules:
                memory.web_action.add(text, batch=1, tx=tx)
    runner = CliRunner()
    result = runner.invoke(app, ["memory", "diff", "--memory", str(tmp_path / "a"), "--against", str(tmp_path / "b")])
    assert result.exit_code == 1
    assert "+ M3: Prefer official sources." in result.stdout and "the memories differ" in result.stdout
    same = runner.invoke(app, ["memory", "diff", "--memory", str(tmp_path / "b"), "--against", str(tmp_path / "b")])
    assert same.exit_code == 0 and "same contents" in same.stdout
    both = runner.invoke(app, ["memory", "diff", "1", "2", "--memory", str(tmp_path / "a"), "--against", "x"])
    assert both.exit_code == 1 and "give no versions" in both.stderr
    empty = runner.invoke(app, ["memory", "diff", "--memory", str(tmp_path / "a"), "--against", str(tmp_path)])
    assert empty.exit_code == 1 and "no memory at" in empty.stderr


def test_an_explicit_request_call_is_logged_readably_and_replayed(tmp_path: Path) -> None:
    from dspy.lm15 import Message, Request

    from memento.core.config import load_settings
    from memento.llm.lm import configure
    from memento.records.lm_log import LMCallLog

    log = tmp_path / "calls.jsonl"
    request = Request(model="openai/x", messages=(Message.user("capital of France?"),), system="Answer in one word.")
    with OpenAICompatServer(ScriptedEngine(overrides={"answer": "Paris"})) as server:
        engine = server.engine
        engine.when("capital of France", raw="Paris")
        roles = configure(load_settings(flags={"lm": "openai/x", "api_base": server.api_base, "cache": False}))
        with LMCallLog(log, roles=roles):
            assert roles.lm(request).message.text == "Paris"
    (line,) = [json.loads(x) for x in log.read_text().splitlines()]
    assert line["messages"] == [
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "capital of France?"},
    ]
    roles = configure(load_settings(flags={"lm": "openai/x", "observe.replay_lm": str(log)}))
    assert roles.lm(request).message.text == "Paris"
