"""The run preset (issue 24 item 2): ``[run] preset = paper`` (``--preset``, ``MEMENTO_RUN_PRESET``) gives each
method its paper's setup for every setting not given explicitly, and ``config show --preset paper --method M --task
T`` marks what it set.

Each value below is checked against the paper's number as the issue quotes it (MEMENTO 2605.29795, Memento
2508.16153, JitMem 2609.27334 Appendix A): a value the preset sets but this table does not quote fails the test."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.core.config import load_settings
from memento.core.presets import apply_preset, family, preset_values

# (method, task, setting, value, the quote)
QUOTED = [
    ("memento", "sales", "budgets.initial_questions", 5, "MEMENTO: budgets 5 initial / 24 total questions"),
    ("memento", "sales", "budgets.total_questions", 24, "MEMENTO: budgets 5 initial / 24 total questions"),
    ("memento", "sales", "budgets.steps_per_question", 10, "MEMENTO: 10 steps per question"),
    ("memento", "sales", "memory.profile", "paper", "MEMENTO: injection profile `paper`"),
    ("memento", "sales", "budgets.exploration", 0, "MEMENTO: test-time exploration 0 for sales"),
    ("memento", "sales", "trainer.batch_size", 10, "MEMENTO: batch size 10"),
    ("memento", "legal", "budgets.exploration", 3, "MEMENTO: ... and 3 for legal with no write-back"),
    ("cbr", None, "cbr.k", 4, "Memento: K = 4"),
    ("cbr", None, "cbr.softmax_over", "q", "Memento: retrieval by softmax(Q/alpha) as Eq. 7 writes it"),
    ("jitmem", None, "jitmem.protocol", "stream", "JitMem (Appendix A): stream protocol"),
    ("jitmem", None, "jitmem.stream_batch", 10, "JitMem: batch 10"),
    ("jitmem", None, "jitmem.k", 3, "JitMem: k = 3"),
    ("jitmem", None, "jitmem.orderings", 3, "JitMem: 3 orderings"),
    ("jitmem", None, "jitmem.executor_temperature", 1.0, "JitMem: executor temperature 1.0"),
    ("jitmem", None, "jitmem.executor_max_tokens", 4096, "JitMem: maximum output 4,096 tokens"),
    ("jitmem", None, "jitmem.executor_history", 3, "JitMem: history window 3"),
    ("jitmem", None, "jitmem.executor_max_turns", 30, "JitMem: 30 turns"),
    ("jitmem", None, "curator_lm.temperature", 0.6, "JitMem: curator temperature 0.6"),
    ("jitmem", None, "curator_lm.top_p", 0.95, "JitMem: top-p 0.95"),
    ("jitmem", None, "curator_lm.top_k", 20, "JitMem: top-k 20 (the open-weights curator)"),
    ("jitmem", None, "jitmem.train_executor", "base", "JitMem: the training bank built by the base executor"),
    ("jitmem", None, "jitmem.train_gate", "ground_truth", "JitMem: ... and gated by ground truth"),
    ("jitmem", None, "jitmem.warm", True, "JitMem: warm start of 100 training trajectories"),
    ("jitmem", None, "jitmem.warm_size", 100, "JitMem: warm start of 100 training trajectories (seeded sample)"),
]


@pytest.mark.parametrize(("method", "task", "key", "value", "quote"), QUOTED, ids=[f"{q[0]}-{q[2]}" for q in QUOTED])
def test_each_preset_value_is_the_papers(method, task, key, value, quote):
    settings = apply_preset(load_settings(flags={"run": {"preset": "paper"}}), method, task)
    section, field = key.split(".")
    got = getattr(settings.role(section) if section.endswith("_lm") else getattr(settings, section), field)
    assert got == value, quote
    assert settings.source_of(key) == "preset paper"


@pytest.mark.parametrize(
    ("method", "task"), [("memento", "sales"), ("memento", "legal"), ("cbr", None), ("jitmem", None)]
)
def test_the_preset_sets_nothing_the_table_does_not_quote(method, task):
    quoted = {(key, value) for m, t, key, value, _q in QUOTED if m == method and t in (task, None, "sales")}
    if task == "legal":
        quoted = {(k, v) for k, v in quoted if k != "budgets.exploration"} | {("budgets.exploration", 3)}
    assert {(key, value) for key, (value, _where) in preset_values("paper", method, task).items()} <= quoted


def test_families_and_the_task_dependence():
    assert family("aet") == family("memento") == family("gepa:aet") == family("closed_book_memory") == "memento_paper"
    assert family("few_shot_cases") == "memento_cbr" and family("jitmem") == "jitmem" and family("unknown") is None
    assert preset_values("paper", "memento", "legal")["budgets.exploration"][0] == 3
    assert "budgets.exploration" not in preset_values("paper", "memento", "multihop")  # the paper does not say
    assert preset_values("none", "jitmem") == {}
    assert preset_values("paper", "gepa:react")["memory.profile"][0] == "paper"


def test_explicit_values_win_and_none_changes_nothing(tmp_path, monkeypatch):
    settings = load_settings(flags={"run": {"preset": "paper"}, "jitmem": {"orderings": 5}})
    out = apply_preset(settings, "jitmem")
    assert out.jitmem.orderings == 5 and out.source_of("jitmem.orderings") == "flag" and out.jitmem.k == 3
    monkeypatch.setenv("MEMENTO_CBR_K", "8")
    monkeypatch.setenv("MEMENTO_RUN_PRESET", "paper")
    config = tmp_path / "memento.toml"
    config.write_text('[cbr]\nsoftmax_over = "logit"\n')
    cbr = apply_preset(load_settings(config), "cbr")
    assert cbr.run.preset == "paper" and cbr.source_of("run.preset") == "env"
    assert (cbr.cbr.k, cbr.source_of("cbr.k")) == (8, "env")
    assert (cbr.cbr.softmax_over, cbr.source_of("cbr.softmax_over")) == ("logit", "file")
    monkeypatch.delenv("MEMENTO_RUN_PRESET")
    plain = load_settings()
    assert apply_preset(plain, "jitmem") is plain  # preset none
    twice = apply_preset(apply_preset(settings, "jitmem"), "jitmem")
    assert twice.jitmem.k == 3 and twice.source_of("jitmem.k") == "preset paper"


@pytest.mark.parametrize("task", [[], ["--task", "multihop"]], ids=["no-task", "multihop"])
def test_config_show_marks_every_jitmem_setting_of_the_paper(task):
    """Done means: ``memento config show --preset paper --method jitmem`` lists every JitMem setting of the paper."""
    result = CliRunner().invoke(
        app, ["config", "show", "--preset", "paper", "--method", "jitmem", *task], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    rows = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if line.count("│") >= 4}
    for method, _task, key, value, _quote in QUOTED:
        if method == "jitmem":
            assert key in rows and "preset paper" in rows[key], key
            assert str(value) in rows[key], key
    assert "preset paper" not in rows["budgets.total_questions"]  # a MEMENTO value: not JitMem's


def test_config_show_with_the_task_shows_legal_exploration():
    legal = CliRunner().invoke(
        app, ["config", "show", "--preset", "paper", "--method", "memento", "--task", "legal"], env={"COLUMNS": "200"}
    )
    sales = CliRunner().invoke(
        app, ["config", "show", "--preset", "paper", "--method", "memento", "--task", "sales"], env={"COLUMNS": "200"}
    )
    pick = lambda out: next(line for line in out.stdout.splitlines() if "budgets.exploration" in line)  # noqa: E731
    assert "3" in pick(legal) and "preset paper" in pick(legal)
    assert "0" in pick(sales) and "preset paper" in pick(sales)
    bare = CliRunner().invoke(app, ["config", "show", "--preset", "paper"], env={"COLUMNS": "200"})
    assert bare.exit_code == 0 and "give --method" in bare.stdout


def test_build_program_applies_the_preset(tmp_path):
    settings = load_settings(flags={"run": {"preset": "paper"}, "web": {"backend": "offline"}})
    agent = build_jitmem(settings, tmp_path)
    assert agent.k == 3 and agent.executor.max_steps == 30 and agent.executor.agent.history_window == 3
    cbr = __import__("memento.programs.registry", fromlist=["build_program"]).build_program(
        "cbr", task="multihop", settings=settings, memory_dir=tmp_path / "cbr"
    )
    assert cbr.k == 4 and cbr.softmax_over == "q"


def build_jitmem(settings, memory_dir):
    from memento.programs.registry import build_program

    return build_program("jitmem", task="multihop", settings=settings, memory_dir=memory_dir)
