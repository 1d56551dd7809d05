"""No future leaks (issue 22, Done means): a memory trained on samples with cutoff 2008 that read pages dated 2007
and 2008 (plus a sample that read a page dated 2001, and one without a cutoff that read an undated page), then a test
sample with cutoff 2003, for MEMENTO, JitMem and CBR memories trained and evaluated through the CLI against a local
OpenAI-compatible server: no fact, rule, trajectory or case dated 2003 or later reaches any prompt the server logs,
the 2001 items do (the positive control), and the audit in results.json reports 0 shown after the cutoff; with the
filter switched off it reports more. With ``undated = "drop"`` the undated items and the undated page are kept away
too, and results count them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.memory.case_bank import CaseBank
from memento.memory.embedder import HashingEmbedder
from memento.testing import OpenAICompatServer, ScriptedEngine, react_steps_done

DOCS = [  # each page names its animal only, so a training run's search finds its own page and no other
    {"url": "https://late.example/zebra", "title": "Zebra herds", "published": "2007-05-01",
     "text": "The zebra herds of Kenya: a zebra count of many in the savanna."},
    {"url": "https://late.example/gnu", "title": "Gnu herds", "published": "2008-02-01",
     "text": "The gnu herds of Tanzania: a gnu count of many on the plains."},
    {"url": "https://early.example/alpaca", "title": "Alpaca herds", "published": "2001-05-01",
     "text": "The alpaca herds of Peru: an alpaca count of many in the Andes."},
    {"url": "https://undated.example/ocelot", "title": "Ocelot herds",
     "text": "The ocelot herds of Brazil: an ocelot count of many in the forest."},
]  # fmt: skip
ANIMALS = {"zebra": 0, "gnu": 1, "alpaca": 2, "ocelot": 3}
TRAIN: list[dict[str, Any]] = [
    {"id": "tz", "question": "What is the zebra count in Kenya?", "answers": ["many"], "cutoff": "2008-06-01"},
    {"id": "tg", "question": "What is the gnu count in Tanzania?", "answers": ["many"], "cutoff": "2008-06-01"},
    {"id": "ta", "question": "What is the alpaca count in Peru?", "answers": ["many"], "cutoff": "2008-06-01"},
    {"id": "to", "question": "What is the ocelot count in Brazil?", "answers": ["many"]},  # no cutoff: undated
]
TEST = [{"id": "x1", "question": "Compare the zebra count, gnu count, alpaca count and ocelot count.",
         "answers": ["many"], "cutoff": "2003-01-01"}]  # fmt: skip
LATE = ("ZEBRA", "GNU")  # items learned from pages dated 2007 and 2008: never shown to the 2003 task
EARLY = "ALPACA"  # learned from a page dated 2001: shown (the positive control)
UNDATED = "OCELOT"  # learned without a cutoff from an undated page: shown under keep, dropped under drop


def _animal(call: Any) -> str | None:
    """The one animal a call's task (else its question) names; ``None`` for the test task, which names none."""
    for key in ("task", "question"):
        found = [name for name in ANIMALS if name in str(call.inputs.get(key, "")).lower()]
        if found:
            return found[0] if len(found) == 1 else None
    return None


def _mark(call: Any, kind: str) -> str:
    animal = _animal(call)
    return f"{kind}-{animal.upper()}" if animal else f"{kind}-NONE"


def _step(call: Any) -> str:
    """Training runs search their animal and open its page; the test run searches its question, then answers."""
    animal, done = _animal(call), react_steps_done(call)
    if done == 0:
        return "search_web"
    return "scrape" if animal is not None and done == 1 else "finish"


def _args(call: Any) -> dict[str, Any]:
    animal, step = _animal(call), _step(call)
    if step == "search_web":
        return {"query": animal or str(call.inputs.get("task") or call.inputs.get("question", ""))}
    if step == "scrape":
        return {"url": DOCS[ANIMALS[str(animal)]]["url"]}
    return {}


def _facts(call: Any) -> list[dict[str, Any]]:
    animal = _animal(call)
    if animal is None:
        return []
    return [{"entity": "Census", "fact": f"FACT-{animal.upper()} the census counted many.",
             "sources": [DOCS[ANIMALS[animal]]["url"]]}]  # fmt: skip


def _engine() -> ScriptedEngine:
    engine = ScriptedEngine()
    engine.when(
        predicate=lambda c: "next_tool_name" in c.output_fields, next_tool_name=_step, next_tool_args=_args,
        next_thought="look it up",
    )  # fmt: skip
    engine.when(predicate=lambda c: "sub_questions" in c.output_fields, sub_questions=lambda c: [c.inputs["task"]])
    engine.when(predicate=lambda c: "new_questions" in c.output_fields, new_questions=[], reflection="enough")
    engine.when(predicate=lambda c: "insights" in c.output_fields, insights=lambda c: [f"{_mark(c, 'CRAFT')} tip."])
    engine.when(
        predicate=lambda c: "operations" in c.output_fields and "search_log" in c.inputs,
        operations=lambda c: [{"op": "add", "text": f"{_mark(c, 'WEBRULE')} search the census.", "reason": "ok"}],
    )
    engine.when(
        predicate=lambda c: "operations" in c.output_fields and "judged_run" in c.inputs,
        operations=lambda c: [{"op": "add", "text": f"{_mark(c, 'DECOMP')} ask per animal.", "reason": "ok"}],
    )
    engine.when(predicate=lambda c: "facts" in c.output_fields, facts=_facts)
    engine.when(predicate=lambda c: "accept" in c.output_fields, accept=True, reason="supported")
    engine.when(predicate=lambda c: "verdict" in c.output_fields, verdict="distinct", merged="")
    engine.when(predicate=lambda c: "relevant" in c.output_fields, relevant=[1, 2, 3, 4, 5, 6, 7, 8])
    engine.when(predicate=lambda c: "sub_tasks" in c.output_fields,
                sub_tasks=lambda c: [f"{_mark(c, 'PLAN')} herd lookup"], done=True)  # fmt: skip
    engine.when(predicate=lambda c: "reward" in c.output_fields, reward=1.0)
    engine.when(predicate=lambda c: "success" in c.output_fields, success=True)
    engine.when(predicate=lambda c: "answer" in c.output_fields, answer=lambda c: _mark(c, "ANSWER"))
    return engine


def _cli(args: list[str], server: OpenAICompatServer, env: dict[str, str]) -> Any:
    result = CliRunner().invoke(
        app, [*args, "--lm", "openai/x", "--api-base", server.api_base], env={"COLUMNS": "200", **env}
    )
    assert result.exit_code == 0, result.output
    return result


def _env(tmp_path: Path, corpus: Path, **extra: str) -> dict[str, str]:
    return {
        "MEMENTO_WEB_CORPUS": str(corpus),
        "MEMENTO_WEB_CACHE_DIR": str(tmp_path / "webcache"),
        "MEMENTO_LM_CACHE": "false",
        "MEMENTO_RUN_THREADS": "1",
        "MEMENTO_BUDGETS_INITIAL_QUESTIONS": "1",
        "MEMENTO_BUDGETS_TOTAL_QUESTIONS": "1",
        "MEMENTO_BUDGETS_STEPS_PER_QUESTION": "3",
        "MEMENTO_TRAINER_EXPLORATION": "0",
        "MEMENTO_TRAINER_BATCH_SIZE": "4",
        "MEMENTO_CBR_MAX_CYCLES": "1",
        **extra,
    }


def _prompts(server: OpenAICompatServer) -> str:
    return "\n".join(json.dumps(r["body"]) for r in server.requests)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One memory directory holding all three memories, each trained through the CLI on the four samples."""
    root = tmp_path_factory.mktemp("dated")
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in DOCS), encoding="utf-8")
    train, test = root / "train.jsonl", root / "test.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in TRAIN), encoding="utf-8")
    test.write_text("".join(json.dumps(r) + "\n" for r in TEST), encoding="utf-8")
    memory = root / "mem"
    CaseBank(memory / "cbr", HashingEmbedder(dim=64)).close()  # the bank's embedder: hashing, no model to load
    env = _env(root, corpus)
    with pytest.MonkeyPatch.context() as mp:  # the isolation of tests/conftest.py, for this module-wide setup
        import dspy

        mp.chdir(root)
        mp.setenv("DSPY_CACHEDIR", str(root / "dspy_cache"))
        dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
        with OpenAICompatServer(_engine()) as server:
            _cli(["train", "--task", "multihop", "--data", str(train), "--memory", str(memory)], server, env)
            for row in TRAIN:
                cutoff = ["--cutoff", row["cutoff"]] if "cutoff" in row else []
                for method in ("cbr", "jitmem"):
                    _cli(["run", "--task", "multihop", "--method", method, "--memory", str(memory), "--question",
                          row["question"], *cutoff], server, env)  # fmt: skip
    return {"root": root, "corpus": corpus, "test": test, "memory": memory}


def _eval(trained: dict[str, Any], method: str, name: str, **extra: str) -> tuple[str, dict[str, Any]]:
    out = trained["root"] / f"eval-{method}-{name}"
    env = _env(trained["root"], trained["corpus"], **extra)
    with OpenAICompatServer(_engine()) as server:
        _cli(["eval", "--task", "multihop", "--data", str(trained["test"]), "--method", method, "--memory",
              str(trained["memory"]), "--out", str(out)], server, env)  # fmt: skip
        prompts = _prompts(server)
    return prompts, json.loads((out / "results.json").read_text(encoding="utf-8"))


MARKS = {
    "memento": ("FACT", "WEBRULE", "CRAFT", "DECOMP"),  # M4 facts, M3 rules, M1 insights, M2 rules
    "cbr": ("PLAN",),  # the cases' plans
    "jitmem": ("ANSWER",),  # the trajectories' answers
}


def test_the_trained_items_carry_their_dates(trained: dict[str, Any]) -> None:
    from memento.memory.forget import memory_items

    dates = {(i.store, i.text.split()[0] if i.store != "facts" else i.text.split()[1]): i.dated
             for i in memory_items(trained["memory"])}  # fmt: skip
    assert {str(dates[("facts", f"FACT-{a}")]) for a in ("ZEBRA", "GNU", "ALPACA", "OCELOT")} == {
        "2007-05-01", "2008-02-01", "2001-05-01", "None"}  # fmt: skip
    assert str(dates[("web_action", "WEBRULE-ALPACA")]) == "2001-05-01"
    assert str(dates[("decomposition", "DECOMP-GNU")]) == "2008-02-01"
    items = memory_items(trained["memory"])
    assert {str(i.dated) for i in items if i.store == "cases"} == {"2007-05-01", "2008-02-01", "2001-05-01", "None"}
    assert {str(i.dated) for i in items if i.store == "trajectories"} == {
        "2007-05-01", "2008-02-01", "2001-05-01", "None"}  # fmt: skip


@pytest.mark.parametrize("method", ["memento", "cbr", "jitmem"])
def test_a_2003_task_never_sees_2007_or_2008_items_and_sees_the_2001_ones(trained, method) -> None:
    prompts, results = _eval(trained, method, "keep")
    for kind in MARKS[method]:
        for late in LATE:
            assert f"{kind}-{late}" not in prompts, f"{kind}-{late} reached a prompt"
    assert any(f"{kind}-{EARLY}" in prompts for kind in MARKS[method])  # the positive control
    assert any(f"{kind}-{UNDATED}" in prompts for kind in MARKS[method])  # undated: kept by default
    audit = results["leakage"]
    assert audit["items_after_cutoff"] == 0 and audit["pages_after_cutoff"] == 0
    assert audit["items_hidden"] >= 2 and audit["items_undated_kept"] >= 1
    example = results["examples"][0]["leakage"]
    assert example["cutoff"] == "2003-01-01" and example["items_shown"] >= 2
    assert (trained["root"] / f"eval-{method}-keep" / "results.md").read_text().count("Leakage audit") == 1


@pytest.mark.parametrize("method", ["memento", "cbr", "jitmem"])
def test_with_the_filter_off_the_audit_reports_the_leak(trained, method) -> None:
    prompts, results = _eval(trained, method, "off", MEMENTO_MEMORY_CUTOFF_FILTER="false")
    assert any(f"{kind}-{late}" in prompts for kind in MARKS[method] for late in LATE)
    audit = results["leakage"]
    assert audit["items_after_cutoff"] > 0 and audit["examples_leaking"] == 1 and not audit["filtered"]
    assert "**Leakage:" in (trained["root"] / f"eval-{method}-off" / "results.md").read_text()


@pytest.mark.parametrize("method", ["memento", "cbr", "jitmem"])
def test_undated_drop_keeps_undated_items_and_pages_away_and_counts_them(trained, method) -> None:
    prompts, results = _eval(trained, method, "drop", MEMENTO_WEB_UNDATED="drop")
    for kind in MARKS[method]:
        for hidden in (*LATE, UNDATED):
            assert f"{kind}-{hidden}" not in prompts
    assert any(f"{kind}-{EARLY}" in prompts for kind in MARKS[method])
    assert "undated.example" not in prompts  # the undated page is not a search result either
    audit = results["leakage"]
    assert audit["items_after_cutoff"] == 0 and audit["items_undated_kept"] == 0
    assert audit["items_undated_dropped"] >= 1 and audit["pages_undated_dropped"] >= 1


@pytest.mark.parametrize("method", ["aet", "react"])
def test_undated_drop_drops_undated_pages_in_aet_and_react_and_results_count_them(trained, method) -> None:
    kept, kept_results = _eval(trained, method, "keep")
    dropped, dropped_results = _eval(trained, method, "drop", MEMENTO_WEB_UNDATED="drop")
    assert "undated.example/ocelot" in kept and kept_results["leakage"]["pages_undated_kept"] >= 1
    assert "undated.example" not in dropped
    audit = dropped_results["leakage"]
    assert audit["pages_undated_dropped"] >= 1 and audit["pages_undated_kept"] == 0 and audit["undated"] == "drop"
    assert audit["pages_after_cutoff"] == 0 and "late.example" not in kept + dropped  # the web cutoff holds too


def test_config_show_says_which_undated_policy_applies_and_why() -> None:
    from memento.tasks.qa import QATask
    from memento.tasks.task import Task, register_task

    runner = CliRunner()
    plain = runner.invoke(app, ["config", "show", "--task", "multihop"], env={"COLUMNS": "250"})
    assert plain.exit_code == 0
    assert "undated policy: keep — web.undated is not set and task 'multihop' declares no default" in plain.output
    env = runner.invoke(app, ["config", "show"], env={"COLUMNS": "250", "MEMENTO_WEB_UNDATED": "drop"})
    assert "undated policy: drop — set by web.undated (env)" in env.output
    data = json.loads(runner.invoke(app, ["config", "show", "--json"], env={"MEMENTO_WEB_UNDATED": "drop"}).stdout)
    assert data["web.undated"]["value"] == "drop" and data["web.undated"]["effective"] == "drop"

    @register_task
    class DatedQA(QATask):  # a task whose paper declares a default for undated pages
        name = "dated_qa_test"
        undated_policy = "drop"

    try:
        default = runner.invoke(app, ["config", "show", "--task", "dated_qa_test"], env={"COLUMNS": "250"})
        assert "undated policy: drop — web.undated is not set; task 'dated_qa_test' declares 'drop'" in default.output
        wins = runner.invoke(
            app, ["config", "show", "--task", "dated_qa_test"], env={"COLUMNS": "250", "MEMENTO_WEB_UNDATED": "keep"}
        )
        assert "undated policy: keep — set by web.undated (env)" in wins.output  # the setting wins
    finally:
        from memento.tasks import task as task_module

        task_module._REGISTRY.pop("dated_qa_test", None)
    assert Task.undated_policy is None
