"""Every method knob is a setting: `config show` lists it, the builders read it, none hard-codes a number; tasks take
their options in their constructor."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import dspy
import pytest
from typer.testing import CliRunner

from memento.cli import app
from memento.core.config import Settings, load_settings
from memento.core.errors import ConfigError
from memento.programs.registry import build_program, method_names
from memento.tasks.task import get_task

#: The sections holding method knobs.
METHOD_SECTIONS = ("budgets", "memory", "cbr", "jitmem", "trainer", "baselines", "compare")
ROOT = Path(__file__).resolve().parents[2]
#: Where methods, their runners and the commands read knobs.
KNOB_READERS = ("programs", "optimize", "memory", "memento/cli/commands")

#: The standard builder parameters (given by build_program), not knobs.
_STANDARD = {"task", "settings", "roles", "trainset", "memory_dir", "frozen"}


def _config_show() -> str:
    result = CliRunner().invoke(app, ["config", "show"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return result.output


def test_config_show_lists_every_field_of_every_method_section() -> None:
    output = _config_show()
    keys = [f"{s}.{f}" for s in METHOD_SECTIONS for f in type(getattr(Settings(), s)).model_fields]
    assert {"baselines.few_shot_demos", "cbr.max_cycles", "memory.stores", "trainer.batch_size"} <= set(keys)
    missing = [key for key in keys if key not in output]
    assert not missing, missing


def _knob_reads(tree: ast.AST) -> set[tuple[str, str]]:
    """``(section, field)`` of every ``<...>settings.<section>.<field>`` read in ``tree``, following aliases
    (``cbr = settings.cbr`` then ``cbr.k``); a comparison budget (``budget.<field>``, ``ctx.budget.<field>``) is
    the ``[compare]`` section."""
    sections = set(type(Settings()).model_fields) - {"model_config"}
    reads: set[tuple[str, str]] = set()
    for scope in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)):
        aliases: dict[str, str] = {}
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                value = node.value
                if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):  # settings.x.model_copy()
                    value = value.func.value
                if isinstance(value, ast.Attribute) and value.attr in sections and _is_settings(value.value):
                    aliases[node.targets[0].id] = value.attr
        for node in ast.walk(scope):
            if not isinstance(node, ast.Attribute) or not isinstance(node.value, ast.Attribute | ast.Name):
                continue
            inner = node.value
            if isinstance(inner, ast.Attribute) and inner.attr in sections and _is_settings(inner.value):
                reads.add((inner.attr, node.attr))
            elif isinstance(inner, ast.Name) and inner.id in aliases:
                reads.add((aliases[inner.id], node.attr))
            elif (isinstance(inner, ast.Name) and inner.id == "budget") or (
                isinstance(inner, ast.Attribute) and inner.attr == "budget" and isinstance(inner.value, ast.Name)
            ):
                reads.add(("compare", node.attr))
    return reads


def _is_settings(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "settings") or (
        isinstance(node, ast.Attribute) and node.attr == "settings"
    )


def test_config_show_lists_every_knob_the_methods_read(monkeypatch) -> None:
    """Walk the methods, their runners and the commands for every settings knob they read: each is a field of its
    section and `config show` lists it, with its source (also for a value from MEMENTO_<SECTION>_<FIELD>)."""
    # CompareBudget's own API, and dict reads of a reported budget
    methods = {"split_sizes", "for_method", "model_dump", "model_copy", "preset", "get", "items"}
    reads: set[tuple[str, str]] = set()
    for folder in KNOB_READERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            reads |= {r for r in _knob_reads(ast.parse(path.read_text())) if r[1] not in methods}
    settings = Settings()
    expected = {("cbr", "k"), ("cbr", "min_pairs"), ("cbr", "passes"), ("jitmem", "payload_tokens"),
                ("jitmem", "orderings"), ("trainer", "exploration"), ("memory", "dir"),
                ("baselines", "few_shot_demos"), ("compare", "gepa_max_metric_calls"),
                ("compare", "mipro_num_trials"), ("compare", "bootstrap_max_rounds"),
                ("compare", "memory_train_limit"), ("budgets", "exploration")}  # fmt: skip
    assert expected <= reads, sorted(expected - reads)
    unknown = [f"{s}.{f}" for s, f in reads if f not in type(getattr(settings, s)).model_fields]
    assert not unknown, unknown
    monkeypatch.setenv("MEMENTO_COMPARE_MIPRO_NUM_TRIALS", "17")
    monkeypatch.setenv("MEMENTO_COMPARE_PRESET", "tiny")
    output = _config_show()
    rows = {line.split()[1]: line for line in output.splitlines() if line.count("│") >= 3 and "." in line}
    missing = sorted(f"{s}.{f}" for s, f in reads if f"{s}.{f}" not in rows)
    assert not missing, missing
    assert "17" in rows["compare.mipro_num_trials"] and "env" in rows["compare.mipro_num_trials"]
    assert "24" in rows["compare.gepa_max_metric_calls"]  # a value the preset gives says so
    assert "preset tiny" in rows["compare.gepa_max_metric_calls"]


def test_compare_budgets_are_a_settings_section(tmp_path, monkeypatch) -> None:
    from memento.optimize.budgets import budget_from_settings, resolve_budget

    toml = tmp_path / "memento.toml"
    toml.write_text('[compare]\npreset = "tiny"\ngepa_max_metric_calls = 40\n')
    monkeypatch.setenv("MEMENTO_COMPARE_MEMORY_BATCH_SIZE", "3")
    settings = load_settings(toml, flags={"compare": {"mipro_num_trials": 5}})
    budget = budget_from_settings(settings)
    tiny = resolve_budget("tiny")
    assert (budget.preset, budget.gepa_max_metric_calls, budget.memory_batch_size, budget.mipro_num_trials) == (
        "tiny",
        40,
        3,
        5,
    )
    assert budget.mipro_num_candidates == tiny.mipro_num_candidates  # the rest from the preset
    assert settings.source_of("compare.gepa_max_metric_calls") == "file"
    # another preset named by the caller (`compare(budget="medium")`) keeps the explicit values
    medium = budget_from_settings(settings, "medium")
    assert medium.preset == "medium" and medium.gepa_max_metric_calls == 40
    assert medium.mipro_num_candidates == resolve_budget("medium").mipro_num_candidates
    with pytest.raises(ConfigError, match="unknown budget preset 'huge'"):
        load_settings(flags={"compare": {"preset": "huge"}})
    with pytest.raises(ConfigError, match="compare.gepa_max_metric_calls"):
        load_settings(flags={"compare": {"gepa_max_metric_calls": 0}})


def test_memento_builder_builds_the_training_form(tmp_path) -> None:
    """One builder for `memento`: frozen by default (run, eval), writable with its learner when frozen=False
    (train, compare), exploring [trainer] exploration steps per sample."""
    from memento.memory.embedder import HashingEmbedder
    from memento.optimize.memento_trainer import MementoTrainer

    settings = load_settings(flags={"trainer": {"exploration": 2}, "web": {"backend": "offline"}})
    vectors = HashingEmbedder()
    program = build_program("memento", task="qa", settings=settings, memory_dir=tmp_path / "m", frozen=False,
                            embedder=vectors)  # fmt: skip
    assert not program.memory.frozen and program.memory.embedder is vectors
    assert program.budgets.exploration == 2 and settings.budgets.exploration == 0
    trainer = MementoTrainer.for_program(program, lambda *a, **k: 1.0, settings)
    assert trainer.learner is program.stages.learner and trainer.memory is program.memory
    assert trainer.batch_size == settings.trainer.batch_size
    program.memory.commit_version(batch=1)
    frozen = build_program("memento", task="qa", settings=settings, memory_dir=tmp_path / "m")
    assert frozen.memory.frozen and frozen.budgets.exploration == 0
    with pytest.raises(ConfigError, match="takes no"):
        build_program("closed_book", task="qa", settings=settings, gate=1)


def _builder_functions() -> list[tuple[str, ast.FunctionDef, object]]:
    """Every registered builder and the module functions it calls (``_react``, ``_build``): name, AST, function."""
    from memento.programs import registry

    out: dict[str, tuple[str, ast.FunctionDef, object]] = {}
    for method in method_names():
        fn = registry._BUILDERS[method]
        module = inspect.getmodule(fn)
        assert module is not None
        tree = ast.parse(Path(inspect.getfile(module)).read_text())
        defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        node = defs[fn.__name__]
        out[f"{module.__name__}.{fn.__name__}"] = (method, node, fn)
        for call in (n for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)):
            name = call.func.id if isinstance(call.func, ast.Name) else ""
            if name in defs:
                helper = defs[name]
                out[f"{module.__name__}.{helper.name}"] = ("", helper, getattr(module, helper.name))
    return [(where, node, fn) for where, (_m, node, fn) in out.items()]


def test_no_builder_hard_codes_a_numeric_knob() -> None:
    builders = _builder_functions()
    assert len(builders) > len(method_names())  # every registered method, and the helpers they call
    literal = []
    for where, node, _fn in builders:
        for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
            for kw in call.keywords:
                value = kw.value
                if isinstance(value, ast.Constant) and type(value.value) in (int, float):
                    literal.append(f"{where}: {kw.arg}={value.value!r}")
    assert not literal, literal


#: Builder keywords beyond the standard ones: an override of a listed setting, or an injected object (not a knob).
_OVERRIDES = {"policy": ("cbr.policy", "jitmem.policy"), "executor": ("jitmem.executor",)}
_INJECTED = {"embedder", "reward_fn", "web"}


def test_builder_keywords_are_overrides_of_listed_settings_or_injected_objects() -> None:
    from memento.programs import registry

    output = _config_show()
    seen = set()
    for fn in {registry._BUILDERS[m] for m in method_names()}:
        where = f"{fn.__module__}.{fn.__name__}"
        extra = set(inspect.signature(fn).parameters) - _STANDARD - _INJECTED
        unknown = extra - set(_OVERRIDES)
        assert not unknown, f"{where} takes {sorted(unknown)}: make it a setting"
        seen |= extra
    for name in seen:
        assert any(key in output for key in _OVERRIDES[name]), name


def _trainset() -> list[dspy.Example]:
    return [dspy.Example(question=f"q{i}", answer=f"a{i}", sources=[]).with_inputs("question") for i in range(8)]


@pytest.mark.parametrize("method", ["few_shot", "few_shot_cases"])
def test_few_shot_demos_come_from_the_baselines_section(method, tmp_path) -> None:
    from memento.memory.embedder import HashingEmbedder

    settings = load_settings(flags={"baselines": {"few_shot_demos": 3}})
    if method == "few_shot_cases":
        from memento.programs.case_memory import build_few_shot_cases

        vectors = HashingEmbedder()
        program = build_few_shot_cases(
            task=get_task("qa"), settings=settings, trainset=_trainset(), memory_dir=tmp_path, embedder=vectors
        )
    else:
        program = build_program(method, task="qa", settings=settings, trainset=_trainset())
    assert len(program.answer.demos) == 3
    default = build_program("few_shot", task="qa", settings=load_settings(), trainset=_trainset())
    assert len(default.answer.demos) == 5


def test_cbr_max_cycles_comes_from_the_cbr_section(tmp_path, monkeypatch) -> None:
    from memento.memory.embedder import HashingEmbedder
    from memento.programs.case_based_agent import build_cbr

    monkeypatch.setenv("MEMENTO_CBR_MAX_CYCLES", "5")
    settings = load_settings(flags={"web": {"backend": "offline"}})
    assert settings.source_of("cbr.max_cycles") == "env"
    agent = build_cbr(task=get_task("qa"), settings=settings, memory_dir=tmp_path, embedder=HashingEmbedder())
    assert agent.max_cycles == 5
    with pytest.raises(ConfigError, match="cbr.max_cycles"):
        load_settings(flags={"cbr": {"max_cycles": 0}})


# -- tasks take their options in their constructor ------------------------------------------------------------------
def test_task_options_go_to_the_constructor() -> None:
    import memento.tasks.legal  # noqa: F401  (registers legal)
    import memento.tasks.sales  # noqa: F401

    roles = object()
    legal = get_task("legal", llm_scrub=True, roles=roles, threads=2, cutoff_years=3)
    assert isinstance(legal, memento.tasks.legal.LegalTask)
    assert (legal.llm_scrub, legal.roles, legal.threads, legal.cutoff_years) == (True, roles, 2, 3)
    plain = get_task("legal", llm_scrub=None)  # None: the task's default holds
    assert isinstance(plain, memento.tasks.legal.LegalTask)
    assert plain.llm_scrub is False and plain.roles is None
    sales = get_task("sales", roles=roles, threads=2)  # threads is offered; sales does not take it
    assert isinstance(sales, memento.tasks.sales.SalesTask)
    assert sales.roles is roles and not hasattr(sales, "threads")
    qa = get_task("qa", roles=roles, threads=2)
    assert qa.name == "qa"
    with pytest.raises(ConfigError, match="task 'qa' takes no option 'llm_scrub'"):
        get_task("qa", llm_scrub=True)
    with pytest.raises(ConfigError, match="unknown task"):
        get_task("nope")


def test_commands_set_no_task_attributes() -> None:
    """No command assigns options to a task object after building it (they go to the constructor)."""
    compare = [*(ROOT / "optimize").glob("compare*.py"), *(ROOT / "optimize" / "runners").glob("*.py")]
    for path in [*(ROOT / "memento" / "cli" / "commands").glob("*.py"), *compare]:
        text = path.read_text()
        for attr in ("llm_scrub", "threads"):
            assert f"task_spec.{attr} =" not in text and f"task_obj.{attr} =" not in text, (path, attr)
        assert "task_spec.roles =" not in text and "task_obj.roles =" not in text, path
        assert "hasattr(task" not in text, path  # options are not probed on task objects either


def test_eval_refuses_llm_scrub_for_a_task_without_it(tmp_path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"question": "q", "answer": "a"}\n')
    args = ["eval", "--task", "qa", "--method", "closed_book", "--data", str(data), "--llm-scrub"]
    args += ["--lm", "openai/x", "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 1 and "takes no option 'llm_scrub'" in result.output
    assert not (tmp_path / "out").exists()  # refused before anything was written
