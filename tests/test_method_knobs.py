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
from memento.config import Settings, load_settings
from memento.errors import ConfigError
from memento.programs.registry import build_program, method_names
from memento.tasks.task import get_task

#: The sections holding method knobs.
METHOD_SECTIONS = ("budgets", "memory", "cbr", "jitmem", "trainer", "baselines")

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


def _builder_functions() -> list[tuple[str, ast.FunctionDef, object]]:
    """Every registered builder and the module functions it calls (``_react``, ``_build``): name, AST, function."""
    from memento.programs import registry

    out: dict[str, tuple[str, ast.FunctionDef, object]] = {}
    for method in method_names():
        fn = registry._BUILDERS[method]
        module = inspect.getmodule(fn)
        tree = ast.parse(Path(inspect.getfile(module)).read_text())
        defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
        node = defs[fn.__name__]
        out[f"{module.__name__}.{fn.__name__}"] = (method, node, fn)
        for call in (n for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)):
            if call.func.id in defs:
                helper = defs[call.func.id]
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
                    literal.append(f"{where}: {kw.arg}={value.value}")
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
    assert (legal.llm_scrub, legal.roles, legal.threads, legal.cutoff_years) == (True, roles, 2, 3)
    plain = get_task("legal", llm_scrub=None)  # None: the task's default holds
    assert plain.llm_scrub is False and plain.roles is None
    sales = get_task("sales", roles=roles, threads=2)  # threads is offered; sales does not take it
    assert sales.roles is roles and not hasattr(sales, "threads")
    qa = get_task("qa", roles=roles, threads=2)
    assert qa.name == "qa"
    with pytest.raises(ConfigError, match="task 'qa' takes no option 'llm_scrub'"):
        get_task("qa", llm_scrub=True)
    with pytest.raises(ConfigError, match="unknown task"):
        get_task("nope")


def test_commands_set_no_task_attributes() -> None:
    """No command assigns options to a task object after building it (they go to the constructor)."""
    root = Path(__file__).resolve().parents[1]
    for path in [*(root / "memento" / "commands").glob("*.py"), root / "optimize" / "compare.py"]:
        text = path.read_text()
        for attr in ("llm_scrub", "threads"):
            assert f"task_spec.{attr} =" not in text and f"task_obj.{attr} =" not in text, (path, attr)
        assert "task_spec.roles =" not in text, path


def test_eval_refuses_llm_scrub_for_a_task_without_it(tmp_path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"question": "q", "answer": "a"}\n')
    args = ["eval", "--task", "qa", "--method", "closed_book", "--data", str(data), "--llm-scrub"]
    args += ["--lm", "openai/x", "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 1 and "takes no option 'llm_scrub'" in result.output
    assert not (tmp_path / "out").exists()  # refused before anything was written
