"""The method registry imports only the module of the method it builds (issue 21 item 5: a quick start)."""

from __future__ import annotations

import json
import subprocess
import sys

from memento.programs.registry import _BUILDERS, METHOD_HOMES, method_names


def test_every_built_in_method_is_registered_by_the_module_the_table_names():
    names = method_names()  # imports every method module
    assert set(METHOD_HOMES) <= set(names)
    assert {name: _BUILDERS[name].__module__ for name in METHOD_HOMES} == METHOD_HOMES


def test_building_closed_book_imports_neither_the_other_methods_nor_the_web_layer(tmp_path):
    code = (
        "import json, sys\n"
        "from memento.core.config import load_settings\n"
        "from memento.programs.registry import build_program, method_info\n"
        "assert method_info('closed_book').writes is False\n"
        "program = build_program('closed_book', task='qa', settings=load_settings())\n"
        "print(json.dumps([type(program).__name__, sorted(sys.modules)]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    name, modules = json.loads(done.stdout)
    assert name == "ClosedBook"
    unwanted = {
        "memento.programs.adaptive_exploration_tree",
        "memento.programs.case_based_agent",
        "memento.programs.jitmem_agent",
        "memento.web.offline_corpus",
        "memento.web.fetcher",
        "numpy",
    }
    assert not unwanted & set(modules), sorted(unwanted & set(modules))
