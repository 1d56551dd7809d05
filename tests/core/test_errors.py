"""One error policy: the same fault injected into the toolbox, the AET, CBR, the MEMENTO trainer and the JitMem
stream is handled the same way (a recoverable one is recorded and the run goes on; a fatal one stops the run with
one line), all through :func:`memento.core.error_policy.handle_error`."""

from __future__ import annotations

import logging
import socket
import sys
import threading
from pathlib import Path

import dspy
import pytest

import memento.tasks.multihop  # noqa: F401  (registers the task)
from memento.core.config import Budgets
from memento.core.error_policy import handle_error, is_fatal
from memento.core.errors import (
    ConfigError,
    FatalError,
    LMUnavailableError,
    MementoError,
    MemoryFrozenError,
    ParseError,
    RecoverableError,
)
from memento.core.types import Trajectory
from memento.memory.case_bank import CaseBank
from memento.memory.embedder import HashingEmbedder
from memento.memory.memento_memory import MementoMemory
from memento.memory.trajectory_bank import TrajectoryBank
from memento.metrics.judge import JudgeError
from memento.optimize.jitmem_stream import stream
from memento.optimize.memento_trainer import MementoTrainer
from memento.programs.adaptive_exploration_tree import AdaptiveExplorationTree
from memento.programs.case_based_agent import CaseBasedAgent
from memento.programs.jitmem_agent import JitMemAgent
from memento.programs.jitmem_curator import JitMemCurator
from memento.programs.memento_program import Memento
from memento.programs.toolbox import Toolbox
from memento.tasks.task import get_task
from memento.testing import ScriptedEngine, scripted_lm
from memento.web.errors import FetchFailed, SearchError, WebConfigError
from memento.web.search_result import SearchResult
from memento.web.web_tools import WebTools

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared fixture
from memento_training_fixture import make_engine  # noqa: E402

FAULTS = ("fetch", "parse", "lm_down")
KIND = {"fetch": "SearchError", "parse": "AdapterParseError"}
BUDGETS = Budgets(initial_questions=2, total_questions=3, steps_per_question=3)
QUESTIONS = [
    dspy.Example(id="q1", question="Which state is Albany County in?", answers=["New York"]).with_inputs("question"),
    dspy.Example(id="q2", question="Where was Arthur Penn born?", answers=["Philadelphia"]).with_inputs("question"),
]


class Backend:
    """A search backend; with the ``fetch`` fault every search fails with a :class:`SearchError`."""

    def __init__(self, fault: str) -> None:
        self.fault = fault
        self._lock = threading.Lock()
        self.searches = 0

    def search(self, query, k=10, before=None, undated="keep"):
        with self._lock:
            self.searches += 1
        if self.fault == "fetch":
            raise SearchError("the search engine answered 503")
        return [SearchResult(url="https://ex.org/albany", title="Albany County", snippet="a county in New York")]


def _web(fault: str):
    backend = Backend(fault)
    return lambda cutoff, undated: WebTools(backend, cutoff=cutoff)


def _dead_lm() -> dspy.LM:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return dspy.LM("openai/x", api_base=f"http://127.0.0.1:{port}/v1", api_key="k", cache=False, num_retries=0)


def _configure(fault: str) -> None:
    if fault == "lm_down":
        dspy.configure(lm=_dead_lm())
    elif fault == "parse":
        dspy.configure(lm=scripted_lm(ScriptedEngine().when(raw="no fields in this reply")))
    else:
        dspy.configure(lm=scripted_lm(make_engine()))


def _records(trajectory: Trajectory | None) -> list[str]:
    """Everything a trajectory records about failures: notes, node errors, tool-call errors, the run's error."""
    if trajectory is None:
        return []
    return [
        *trajectory.notes,
        *(n.error or "" for n in trajectory.nodes),
        *(c.error or "" for c in trajectory.tool_calls),
        trajectory.error or "",
    ]


# -- one runner per component: run it under the fault, return the texts where it recorded failures --------------
def run_toolbox(tmp_path: Path, fault: str) -> list[str]:
    def rewrite(query: str) -> str:
        return dspy.Predict("query -> rewritten_query")(query=query).rewritten_query

    box = Toolbox(WebTools(Backend(fault)), rewrite=rewrite)
    text = box.search_web("albany county state")
    assert box.calls and box.calls[0].kind == "search_web"  # the search ran (and was recorded) after any failure
    return [text, *box.failures, *(c.error or "" for c in box.calls)]


def run_aet(tmp_path: Path, fault: str) -> list[str]:
    aet = AdaptiveExplorationTree("qa", web=_web(fault), budgets=BUDGETS, threads=2)
    pred = aet(question="Which state is Albany County in?")
    return _records(pred.trajectory)


def run_cbr(tmp_path: Path, fault: str) -> list[str]:
    bank = CaseBank(tmp_path / "cbr", HashingEmbedder(dim=64))
    agent = CaseBasedAgent(get_task("multihop"), bank=bank, web=_web(fault), budgets=BUDGETS, threads=2)
    pred = agent(question="Which state is Albany County in?")
    return _records(pred.trajectory)


def run_trainer(tmp_path: Path, fault: str) -> list[str]:
    task = get_task("multihop")
    memory = MementoMemory(tmp_path / "mem", embedder=HashingEmbedder())
    program = Memento(task, memory=memory, web=_web(fault), budgets=BUDGETS, threads=2)
    seen: list[Trajectory] = []
    forward = program.forward

    def capture(**kwargs):
        pred = forward(**kwargs)
        seen.append(pred.trajectory)
        return pred

    program.forward = capture  # type: ignore[method-assign]  # records every run the trainer makes
    reports = MementoTrainer(program, task.metric, memory, batch_size=2, threads=2).fit(QUESTIONS)
    assert [r.examples for r in reports] == [2]  # the batch completed
    return [text for trajectory in seen for text in _records(trajectory)]


def run_stream(tmp_path: Path, fault: str) -> list[str]:
    executor = AdaptiveExplorationTree("qa", web=_web(fault), budgets=BUDGETS, threads=1)
    agent = JitMemAgent(executor, TrajectoryBank(tmp_path / "bank"), JitMemCurator())
    result = stream(agent, QUESTIONS, batch_size=1, seed=0)
    assert len(result.items) == 2  # every task of the stream ran
    out: list[str] = []
    for item in result.items:
        out.append(item.error or "")
        out.extend(_records(item.prediction.trajectory if item.prediction is not None else None))
    return out


RUNNERS = {
    "toolbox": run_toolbox,
    "aet": run_aet,
    "cbr": run_cbr,
    "trainer": run_trainer,
    "stream": run_stream,
}


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("component", list(RUNNERS))
def test_the_same_fault_is_handled_the_same_way_everywhere(component, fault, tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    _configure(fault)
    run = RUNNERS[component]
    if fault == "lm_down":  # fatal: the run stops with one line that says what to fix
        with pytest.raises(LMUnavailableError) as info:
            run(tmp_path, fault)
        message = str(info.value)
        assert "unreachable" in message and "\n" not in message
        return
    records = run(tmp_path, fault)  # recoverable: the component returned normally ...
    kind = KIND[fault]
    assert any(kind in text for text in records), records  # ... with the failure recorded in its own output
    failures = [r.memento_failure for r in caplog.records if hasattr(r, "memento_failure")]
    assert any(f.kind == kind for f in failures)  # ... and it went through the one helper


# -- the classification itself ------------------------------------------------------------------------------
def test_the_hierarchy_has_a_fatal_and_a_recoverable_branch():
    fatal = [ConfigError, LMUnavailableError, MemoryFrozenError, WebConfigError]
    recoverable = [FetchFailed, SearchError, JudgeError, ParseError]
    assert all(issubclass(cls, FatalError) and not issubclass(cls, RecoverableError) for cls in fatal)
    assert all(issubclass(cls, RecoverableError) and not issubclass(cls, FatalError) for cls in recoverable)
    assert not issubclass(JudgeError, FatalError)  # used to derive from DataError


@pytest.mark.parametrize(
    ("exc", "fatal"),
    [
        (FetchFailed("404", url="https://x.org"), False),
        (ValueError("could not parse"), False),
        (JudgeError("score out of range"), False),
        (ConfigError("bad key"), True),
        (MementoError("a memento error outside both branches"), True),
        (KeyboardInterrupt(), True),
    ],
)
def test_is_fatal_and_handle_error_agree(exc, fatal):
    assert is_fatal(exc) is fatal
    notes: list[str] = []
    if fatal:
        with pytest.raises(type(exc)):
            handle_error(exc, where="step", record=notes.append)
        assert notes == []
    else:
        failure = handle_error(exc, where="step", record=notes.append)
        assert notes == [str(failure)] and str(failure).startswith(f"step failed ({type(exc).__name__}")


def test_a_recorded_failure_is_one_scrubbed_line():
    exc = RuntimeError("fetch of https://user:hunter22@x.org/a   failed\n  second line")
    failure = handle_error(exc, where="scrape")
    assert str(failure) == "scrape failed (RuntimeError: fetch of https://***:***@x.org/a failed)"


def test_a_fatal_error_inside_a_tool_is_not_swallowed_into_an_observation():
    from memento.programs.bound_react import BoundReAct, tool_spec

    engine = ScriptedEngine().when(predicate=lambda c: "next_tool_name" in c.output_fields, next_tool_name="boom")

    def boom() -> str:
        raise ConfigError("the tool is misconfigured")

    agent = BoundReAct("question -> answer", [tool_spec("boom", "Always fails.", {})], max_iters=2)
    with pytest.raises(ConfigError, match="misconfigured"):
        agent(tools={"boom": boom}, question="q", lm=scripted_lm(engine))
