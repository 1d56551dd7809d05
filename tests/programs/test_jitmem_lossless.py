"""Issue 13's done-means: a JitMem run over an offline corpus that scrapes a page stores that page's full text and
the agent's reasoning steps in the bank, while the executor's prompt had the page clipped; a second run's curator
reads the stored page back from the bank."""

from __future__ import annotations

import json

from memento.core.config import load_settings
from memento.memory.trajectory_bank import TrajectoryBank
from memento.programs.registry import build_program
from memento.tasks import get_task
from memento.web.tool_output import PAGE_CHARS

CURATOR = "You are a memory curator"
JUDGE = "You are judging whether an agent"
LYON = (
    "Lyon is the third-largest city of France. The Roman colony of Lugdunum was founded in 43 BC by Lucius "
    "Munatius Plancus on the hill of Fourviere. "
) * 60
DOCS = [
    {"doc_id": "lyon", "title": "Lyon", "text": LYON},
    {"doc_id": "paris", "title": "Paris", "text": "Paris is the capital of France."},
]
THOUGHT = "The Lyon article will name the founder; I will read it."


def steps_done(call) -> int:
    return sum(1 for key in call.inputs if key.startswith("observation_"))


def is_step(call, n: int) -> bool:
    return "next_tool_name" in call.output_fields and steps_done(call) == n


def test_jitmem_bank_keeps_the_full_page_and_the_steps_the_executor_read_clipped(tmp_path, engine, lm):
    assert len(LYON) > 2 * PAGE_CHARS
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps(d) for d in DOCS) + "\n", encoding="utf-8")
    settings = load_settings(flags={"web": {"corpus": str(corpus), "cache_dir": str(tmp_path / "cache")}})
    engine.when(CURATOR, payload="Read the city's encyclopedia page.")
    engine.when(JUDGE, success=True, reasoning="supported by the page")
    engine.when(
        predicate=lambda c: is_step(c, 0),
        next_thought=THOUGHT,
        next_tool_name="scrape",
        next_tool_args={"url": "corpus://lyon"},
    )
    engine.when(
        predicate=lambda c: is_step(c, 1), next_thought="I have it.", next_tool_name="finish", next_tool_args={}
    )
    engine.when(
        predicate=lambda c: "sources" in c.output_fields and "next_thought" not in c.output_fields,
        answer="Lucius Munatius Plancus",
        sources=["corpus://lyon"],
    )
    memory = tmp_path / "mem"
    agent = build_program("jitmem", task=get_task("qa"), settings=settings, roles=None, memory_dir=memory)
    pred = agent(question="Who founded the Roman colony at Lyon?", task_id="lyon-1")
    assert pred.jitmem["stored"] and pred.trajectory.error is None

    # the executor read the page clipped to the observation budget
    seen = next(c for c in engine.calls if is_step(c, 1)).inputs["observation_0"]
    assert "[... clipped:" in seen and len(seen) < PAGE_CHARS + 200 and LYON not in seen

    # the bank holds the page whole and the agent's reasoning steps
    bank = TrajectoryBank(memory / "jitmem", read_only=True)
    [stored] = bank.get("lyon-1")
    [page] = stored.pages()
    assert page.text == LYON and len(page.text) == len(LYON) == page.chars
    assert [(s.tool_name, s.thought) for s in stored.steps] == [("scrape", THOUGHT), ("finish", "I have it.")]
    call_id = stored.steps[0].call_id
    assert call_id is not None
    assert getattr(stored.call(call_id).page, "sha256", None) == page.sha256
    assert bank.stats().pages == 1
    bank.close()
    # what goes into results files, checkpoints and reports carries the hash and length, not the text
    dumped = pred.trajectory.model_dump_json()
    assert LYON[:1000] not in dumped and len(dumped) < len(LYON) and page.sha256 in dumped  # evidence: a snippet

    # a second, similar task: its curator reads the stored page (and the thought) back from the bank
    pred2 = agent(question="When was the Roman colony at Lyon founded?", task_id="lyon-2")
    assert pred2.jitmem["retrieved"] == ["lyon-1"]
    curator_prompt = engine.calls_matching(CURATOR)[-1].prompt
    assert THOUGHT in curator_prompt and "Lyon is the third-largest city of France." in curator_prompt
    bank = TrajectoryBank(memory / "jitmem", read_only=True)
    assert len(bank) == 2 and bank.stats().pages == 1  # the same page, read twice, stored once
