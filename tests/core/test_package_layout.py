"""Package layout: the layer folders are linked into ``memento/`` by relative symlinks, so static tools follow
``import memento.memory`` on disk, while sdists, wheels, installs and editable installs hold or see every module.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("programs", "signatures", "memory", "metrics", "optimize", "web", "tasks")


def _glue(folder: Path, name: str) -> list[str]:
    """The glue package's own subpackages under ``folder`` (real folders, not the layer symlinks)."""
    found = []
    for sub in sorted(folder.iterdir()):
        if sub.is_dir() and not sub.is_symlink() and (sub / "__init__.py").is_file():
            found += [f"{name}.{sub.name}", *_glue(sub, f"{name}.{sub.name}")]
    return found


GLUE = tuple(_glue(ROOT / "memento", "memento"))


def _modules(folder: Path) -> set[str]:
    return {p.name for p in folder.glob("*.py")}


def _run(cmd: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    return proc


def _venv(where: Path) -> Path:
    """A venv without pip that sees this interpreter's packages (dspy...) but not the memento installed here."""
    _run([sys.executable, "-m", "venv", "--without-pip", str(where)], cwd=where.parent)
    python = where / "bin" / "python"
    deps = where / "parent_packages"  # links to the parent's packages, less memento itself
    deps.mkdir()
    for lib in dict.fromkeys(p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")):
        for entry in Path(lib).iterdir():
            if not entry.name.startswith(("memento", "__editable__", "_memento")) and not (deps / entry.name).exists():
                (deps / entry.name).symlink_to(entry)
    code = "import sysconfig; print(sysconfig.get_path('purelib'))"
    purelib = Path(_run([str(python), "-c", code], cwd=where).stdout.strip())
    (purelib / "_parent_packages.pth").write_text(f"{deps}\n")
    return python


def _pip(python: Path, *args: str) -> None:
    """``pip install`` into ``python``'s venv without any package index: the build uses this venv's setuptools."""
    offline = ("--no-index", "--no-build-isolation", "--disable-pip-version-check")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", *offline, *args],
         cwd=python.parent)  # fmt: skip


def _probe(python: Path, cwd: Path, code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return _run([str(python), "-c", code], cwd=cwd, env=env).stdout.strip()


def test_each_layer_is_a_relative_symlink_and_no_package_dir_mapping() -> None:
    for layer in LAYERS:
        link = ROOT / "memento" / layer
        assert link.is_symlink(), layer
        assert os.readlink(link) == f"../{layer}", layer
        assert (link / "__init__.py").resolve() == (ROOT / layer / "__init__.py").resolve()
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "package-dir" not in tool
    nested = {
        f"memento.{layer}.{sub.name}"
        for layer in LAYERS
        for sub in (ROOT / layer).iterdir()
        if (sub / "__init__.py").is_file()
    }  # fmt: skip  (memento.optimize.runners)
    assert set(tool["packages"]) == {"memento", *GLUE, *(f"memento.{layer}" for layer in LAYERS), *nested}


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """``python -m build``: the sdist, then the wheel built FROM that sdist (so the sdist must hold every module);
    with this venv's setuptools and wheel (``--no-isolation``: no package index is asked)."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)], cwd=out)
    (sdist,) = out.glob("memento_dspy-*.tar.gz")
    (wheel,) = out.glob("memento_dspy-*.whl")
    return sdist, wheel


def test_sdist_holds_every_module_as_a_regular_file(dists: tuple[Path, Path]) -> None:
    sdist, _ = dists
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1]: m for m in tar.getmembers() if "/" in m.name}
    assert not [name for name, m in members.items() if m.issym() or m.islnk()]
    assert {"pyproject.toml", "README.md", "memento/py.typed"} <= set(members)
    for layer in LAYERS:
        held = {name.rsplit("/", 1)[1] for name in members if name.startswith(f"memento/{layer}/")}
        assert _modules(ROOT / layer) <= held, layer
        assert all(members[f"memento/{layer}/{m}"].isfile() for m in _modules(ROOT / layer))


def test_wheel_holds_every_module_as_a_real_file_with_the_source_bytes(dists: tuple[Path, Path]) -> None:
    _, wheel = dists
    zf = zipfile.ZipFile(wheel)
    infos = {i.filename: i for i in zf.infolist()}
    assert not [n for n, i in infos.items() if stat.S_ISLNK(i.external_attr >> 16)]
    assert "memento/py.typed" in infos
    for folder, package in (
        [("memento", "memento")]
        + [(g.replace(".", "/"),) * 2 for g in GLUE]
        + [(layer, f"memento/{layer}") for layer in LAYERS]
    ):
        for module in _modules(ROOT / folder):
            assert zf.read(f"{package}/{module}") == (ROOT / folder / module).read_bytes(), f"{package}/{module}"
    assert {top for n in infos if not (top := n.split("/")[0]).endswith(".dist-info")} == {"memento"}


def test_installed_wheel_imports_every_layer_and_runs_the_cli(
    dists: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    _, wheel = dists
    where = tmp_path_factory.mktemp("venv_wheel")
    python = _venv(where / "venv")
    _pip(python, str(wheel))
    names = ", ".join(f"'memento.{layer}'" for layer in LAYERS)
    code = f"import importlib; print('\\n'.join(importlib.import_module(n).__file__ for n in ({names})))"
    files = _probe(python, where, code).splitlines()
    site = where / "venv" / "lib"
    assert len(files) == len(LAYERS)
    for layer, file in zip(LAYERS, files, strict=True):
        path = Path(file)
        assert path.is_relative_to(site) and path.parent.name == layer and not path.parent.is_symlink(), file
    assert "Usage: memento" in _run([str(where / "venv" / "bin" / "memento"), "--help"], cwd=where).stdout


def test_editable_install_sees_edits_in_the_layer_folders(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        (src / name).write_bytes((ROOT / name).read_bytes())
    for folder in ("memento", *LAYERS):  # the layer links copied as links
        shutil.copytree(ROOT / folder, src / folder, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    assert (src / "memento" / "memory").is_symlink()
    python = _venv(tmp_path / "venv")
    _pip(python, "-e", str(src))
    assert _probe(python, tmp_path, "import memento.memory as m; print(m.__file__)") == str(
        src / "memento" / "memory" / "__init__.py"
    )
    (src / "memory" / "edit_probe.py").write_text("VALUE = 41\n")
    assert _probe(python, tmp_path, "from memento.memory.edit_probe import VALUE; print(VALUE)") == "41"
    (src / "memory" / "edit_probe.py").write_text("VALUE = 42\n")
    assert _probe(python, tmp_path, "from memento.memory.edit_probe import VALUE; print(VALUE)") == "42"
