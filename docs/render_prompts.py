"""Render every stage's prompt for one multi-hop example into ``docs/prompts.md`` (offline, deterministic).

The programs run for real (the Adaptive Exploration Tree over the shipped offline corpus, the CBR planner-executor,
JitMem's curator and gate, MEMENTO's training loop on the same example) while a scripted LM
(:class:`memento.testing.ScriptedEngine`) answers; every prompt memento's structured adapter sends is recorded, and
the first prompt of each stage is written out with the paper section the stage follows and the JSON schema sent.
Regenerate after changing a signature::

    python docs/render_prompts.py --out docs/prompts.md
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import dspy

from memento.core.config import Budgets, load_settings
from memento.llm.structured_adapter import StructuredAdapter
from memento.memory.case_bank import CaseBank
from memento.memory.embedder import HashingEmbedder
from memento.memory.memento_memory import MementoMemory
from memento.memory.trajectory_bank import TrajectoryBank
from memento.programs.adaptive_exploration_tree import AdaptiveExplorationTree
from memento.programs.baselines import ClosedBook
from memento.programs.case_based_agent import CaseBasedAgent
from memento.programs.jitmem_agent import JitMemAgent
from memento.programs.jitmem_curator import JitMemCurator
from memento.programs.memento_program import Memento
from memento.tasks import get_task
from memento.testing import ScriptedCall, ScriptedEngine, scripted_lm
from memento.web.factory import web_tools_factory

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / "examples" / "multihop" / "questions.jsonl"
CORPUS = ROOT / "examples" / "multihop" / "corpus.jsonl"
EXAMPLE_ID = "5ac2758b55429963665199c3"  # "The organization that Nicolae Titulescu served two terms as president ..."
HOP1 = "Which organization did Nicolae Titulescu serve two terms as president of?"
HOP2 = "On what date was the League of Nations founded?"

#: (stage, how a recorded call is recognised, the signature, the paper section the stage follows)
STAGES: list[tuple[str, Callable[[ScriptedCall], bool], str, str]] = [
    ("Decompose (wave 0)", lambda c: "sub_questions" in c.output_fields, "Decompose",
     "MEMENTO §3.3, Adaptive Exploration Tree: decomposition of the task into the first wave of sub-questions"),
    ("Sub-question agent: a tool step", lambda c: "next_tool_name" in c.output_fields, "SolveSubQuestion (ReAct)",
     "MEMENTO §3.3, the tool-using sub-question agent (search memory, then the web, then scrape)"),
    ("Sub-question agent: the answer", lambda c: "sources" in c.output_fields and "question" in c.inputs
     and "task_goal" in c.inputs and "next_thought" not in c.output_fields, "SolveSubQuestion (extract)",
     "MEMENTO §3.3, the sub-question agent's answer with the sources it rests on"),
    ("Reflect (between waves)", lambda c: "new_questions" in c.output_fields, "Reflect",
     "MEMENTO §3.3, reflection: gap analysis between waves, stopping rule (`budgets.stop_early`)"),
    ("Synthesize (bottom-up)", lambda c: "findings" in c.inputs and c.output_fields == ["answer"], "SynthesizeNode",
     "MEMENTO §3.3, bottom-up synthesis of decomposed nodes and the root"),
    ("Final answer", lambda c: "research_findings" in c.inputs and "past_cases" not in c.prompt,
     "AnswerMultiHopQuestionFromFindings", "MEMENTO §3.3, the task's own answer signature over the research findings"),
    ("M1 relevance check", lambda c: "relevant" in c.output_fields, "JudgeRelevance",
     "MEMENTO §3.4, craft knowledge (M1) filtered for the task at hand"),
    ("M1 craft insights", lambda c: "insights" in c.output_fields and "run_record" in c.inputs,
     "DistillCraftInsights", "MEMENTO §3.5, phase A: research craft distilled from one run, added to M1 as deltas"),
    ("M3 web-action rules", lambda c: "search_log" in c.inputs, "DistillWebRules",
     "MEMENTO §3.4-3.5, phase A: web-action rule operations from one run's search log (M3)"),
    ("M4 facts", lambda c: "facts" in c.output_fields, "ExtractFacts",
     "MEMENTO §3.4-3.5, phase A: domain facts extracted from the evidence (M4)"),
    ("Canonicalisation: check", lambda c: "accept" in c.output_fields, "CheckCandidate",
     "MEMENTO §3.4, canonicalisation: correctness and sufficiency check before storage"),
    ("Phase C: coverage", lambda c: "coverage" in c.output_fields, "AssessCoverage",
     "MEMENTO §3.5, phase C: which target elements a sub-question covered"),
    ("M2 decomposition rules", lambda c: "judged_run" in c.inputs, "DistillDecompositionRules",
     "MEMENTO §3.4-3.5, phase C: supervised decomposition-rule operations from one judged run (M2)"),
    ("CBR planner", lambda c: "sub_tasks" in c.output_fields, "PlanFromCases",
     "Memento (CBR): the planner reads K past cases (task, plan, reward; failures included)"),
    ("CBR task reward", lambda c: "reward" in c.output_fields, "JudgeTaskReward",
     "Memento (CBR): the deployed-time reward stored with the case (anchors 0/0.25/0.5/0.75/1)"),
    ("JitMem curator", lambda c: "payload" in c.output_fields, "CurateMemory",
     "JitMem (Figure 1): the read-time curator over k=3 raw trajectories retrieved by BM25 (Appendix A)"),
    ("JitMem storage gate", lambda c: "success" in c.output_fields, "JudgeSuccess",
     "JitMem (Figure 1): the judge that decides whether a trajectory enters the bank"),
    ("Legal leakage filter: the report", lambda c: "found" in c.output_fields, "FindCaseOutcome (extract)",
     "MEMENTO §4.1, the legal protocol's leakage filter: a web agent given a case's facts under its 5-year cutoff"),
]  # fmt: skip
#: a made-up case for the legal leakage agent (``memento data legal``): facts anonymised as the legal loader does
LEGAL_FACTS = (
    "The petitioner, a shipping company, applied for a permit to extend its harbour. The respondent, the port "
    "authority, refused it under a state statute; the court of appeals upheld the refusal."
)


def _example() -> dspy.Example:
    for line in QUESTIONS.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row["id"] == EXAMPLE_ID:
            return dspy.Example(**row).with_inputs("question")
    raise SystemExit(f"example {EXAMPLE_ID} not found in {QUESTIONS}")


def _cited(call: ScriptedCall) -> list[str]:
    urls = re.findall(r"corpus://[0-9a-f]+", call.prompt)
    return urls[:1]


def _first_step(call: ScriptedCall) -> bool:
    return "next_tool_name" in call.output_fields and "observation_0" not in call.inputs


def _script(engine: ScriptedEngine) -> None:
    """Plausible scripted replies, so the rendered prompts show a realistic research state."""
    engine.when(predicate=lambda c: "sub_questions" in c.output_fields, sub_questions=[HOP1])
    engine.when(
        predicate=lambda c: "new_questions" in c.output_fields and HOP2 not in c.inputs["research_tree"],
        reflection="Titulescu presided over the League of Nations Assembly; its founding date is still missing.",
        new_questions=[{"question": HOP2, "parent_id": "root"}],
    )
    engine.when(predicate=lambda c: "new_questions" in c.output_fields, reflection="Both hops are sourced.",
                new_questions=[])  # fmt: skip
    engine.when(
        predicate=lambda c: "facts" in c.inputs and _first_step(c),
        next_thought="Search for reports of this case.",
        next_tool_name="search_web",
        next_tool_args={"query": "harbour permit port authority Supreme Court"},
    )
    engine.when(predicate=lambda c: "found" in c.output_fields, reasoning="No page I read reports this case's "
                "decision.", found=False, winning_party="unknown", disposition="", quote="", source="")  # fmt: skip
    engine.when(
        predicate=lambda c: "next_tool_name" in c.output_fields and "observation_0" not in c.inputs,
        next_thought="Search the web for the sub-question's entity.",
        next_tool_name="search_web",
        next_tool_args=lambda c: {"query": c.inputs.get("question", "")[:60]},
    )
    engine.when(predicate=lambda c: "next_tool_name" in c.output_fields, next_thought="The results answer it.",
                next_tool_name="finish", next_tool_args={})  # fmt: skip
    engine.when(
        predicate=lambda c: "sources" in c.output_fields and "task_goal" in c.inputs,
        answer=lambda c: "the League of Nations" if "Titulescu" in c.inputs.get("question", "") else "10 January 1920",
        sources=_cited,
    )
    engine.when(predicate=lambda c: "findings" in c.inputs and c.output_fields == ["answer"],
                answer="Titulescu twice presided over the League of Nations Assembly; the League was founded on "
                "10 January 1920.")  # fmt: skip
    engine.when(predicate=lambda c: "research_findings" in c.inputs, reasoning="Hop 1 gives the League of Nations; "
                "hop 2 its founding date.", answer="10 January 1920")  # fmt: skip
    engine.when(predicate=lambda c: "sub_tasks" in c.output_fields, sub_tasks=[HOP1, HOP2], done=True)
    engine.when(predicate=lambda c: "reward" in c.output_fields, reasoning="Both hops supported.", reward=1.0)
    payload = "A past run solved this chain: find the organisation first, then its founding date."
    engine.when(predicate=lambda c: "payload" in c.output_fields, payload=payload)
    engine.when(predicate=lambda c: "success" in c.output_fields, reasoning="Answer supported.", success=True)
    insight = "For 'founded on what date' questions, confirm the date on the organisation's own page."
    engine.when(predicate=lambda c: "insights" in c.output_fields, insights=[insight])
    engine.when(
        predicate=lambda c: "facts" in c.output_fields,
        facts=lambda c: [
            {"entity": "League of Nations", "fact": "The League of Nations was founded on 10 January 1920.",
             "sources": _cited(c)}
        ],
    )  # fmt: skip
    engine.when(predicate=lambda c: "operations" in c.output_fields, operations=[])
    engine.when(predicate=lambda c: "relevant" in c.output_fields, relevant=[1])
    engine.when(predicate=lambda c: "accept" in c.output_fields, reason="Specific and actionable.", accept=True)


def _first_calls(engine: ScriptedEngine) -> list[tuple[str, str, str, ScriptedCall]]:
    out = []
    for stage, match, signature, section in STAGES:
        call = next((c for c in engine.calls if _safe(match, c)), None)
        if call is not None:
            out.append((stage, signature, section, call))
    return out


def _safe(match: Callable[[ScriptedCall], bool], call: ScriptedCall) -> bool:
    try:
        return bool(match(call))
    except (KeyError, TypeError):
        return False


def _fence(text: str) -> str:
    return "````text\n" + text.rstrip() + "\n````"


def run(workdir: Path) -> list[tuple[str, str, str, ScriptedCall]]:
    engine = ScriptedEngine()
    _script(engine)
    lm = scripted_lm(engine)
    lm.structured_outputs = "schema"  # as a self-hosted or local model gets it: the signature's JSON schema
    dspy.configure(lm=lm, adapter=StructuredAdapter())
    settings = load_settings(flags={"web": {"corpus": str(CORPUS), "cache_dir": str(workdir / "web")}})
    web = web_tools_factory(settings)
    budgets = Budgets(initial_questions=2, total_questions=3, steps_per_question=3)
    task = get_task("multihop")
    example = _example()
    embedder = HashingEmbedder(dim=128)

    memory = MementoMemory(workdir / "memento", embedder=embedder)
    with memory.transaction(batch=1) as tx:
        seed = "Find the bridge entity first, then ask for its attribute."
        memory.craft.add(seed, provenance=["seed"], batch=1, tx=tx)
    program = Memento(task, memory=memory, web=web, budgets=budgets)
    from memento.optimize.memento_trainer import MementoTrainer

    MementoTrainer(program, task.metric, memory, batch_size=1, threads=1).fit([example])

    bank = CaseBank(workdir / "cbr", embedder)
    bank.add("Which country did the founder of Tesla's first battery supplier come from?", "1. ... (answered)", 0.25)
    cbr = CaseBasedAgent(task, bank=bank, web=web, budgets=budgets, max_cycles=1)
    cbr(question=example.question, task_id="cbr-run")

    aet = AdaptiveExplorationTree(task, web=web, budgets=budgets)
    past = aet(question=example.question, task_id="past-run").trajectory
    trajectories = TrajectoryBank(workdir / "jitmem")
    past.task_id = "past-run"
    trajectories.add(past, accepted=True)
    JitMemAgent(ClosedBook(task), trajectories, JitMemCurator(), k=3, task=task)(question=example.question)
    from memento.programs.leakage_probe import LeakageProbe

    LeakageProbe(web=web, max_steps=2)(facts=LEGAL_FACTS, cutoff="2009-01-01")
    return _first_calls(engine)


def render(calls: list[tuple[str, str, str, ScriptedCall]]) -> str:
    example = _example()
    lines = [
        "# The prompts of every stage",
        "",
        "Generated by `python docs/render_prompts.py --out docs/prompts.md` (do not edit by hand): the programs run",
        "over the shipped offline corpus on one multi-hop question (the legal leakage agent on one made-up case)",
        "while a scripted LM answers, and the first prompt memento's structured adapter (DSPy's JSON adapter,",
        "`memento.llm.structured_adapter`) sends for each stage is shown as sent (system message, then the user",
        "message),",
        "with the JSON schema it sends as `response_format` to a model behind `--api-base` or a local one",
        "(`structured_outputs = auto`; `off` gives DSPy's ChatAdapter).",
        "Untrusted text (pages, search results, tool output, past runs and cases, memory facts, answers written from",
        "them) appears only inside `<data>` ... `</data>` blocks (`memento/core/untrusted.py`); learned rules and",
        "craft knowledge are framed as guidance that never overrides the task.",
        "",
        f"Example: `{example.question}` (expected answer: {example.answers[0]}; HotpotQA id `{EXAMPLE_ID}`).",
        "",
        "| # | stage | signature | follows |",
        "|---|---|---|---|",
    ]
    for i, (stage, signature, section, _call) in enumerate(calls, 1):
        lines.append(f"| {i} | {stage} | `{signature}` | {section} |")
    for i, (stage, signature, section, call) in enumerate(calls, 1):
        lines += ["", f"## {i}. {stage}", "", f"Signature `{signature}`. Follows {section}.", ""]
        lines += ["System message:", "", _fence(call.system), ""]
        for message in call.messages:
            lines += [f"{message['role'].capitalize()} message:", "", _fence(message.get("content", "")), ""]
        if call.response_format:
            schema = json.dumps(call.response_format, ensure_ascii=False)
            lines += ["Response format:", "", "```json\n" + schema + "\n```", ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "prompts.md")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        calls = run(Path(tmp))
    missing = [s for s, *_ in STAGES if s not in {c[0] for c in calls}]
    text = render(calls)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}: {len(calls)} stages" + (f"; not reached: {', '.join(missing)}" if missing else ""))


if __name__ == "__main__":
    main()
