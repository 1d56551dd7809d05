"""Offline test harness: environment isolation, a network guard, scripted LMs and a local OpenAI-compatible server."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

from memento.testing import OpenAICompatServer, ScriptedEngine, scripted_lm  # noqa: E402

if TYPE_CHECKING:
    from memento.memory.location import Location

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex
_blocked: list[str] = []  # non-loopback attempts of the running test (code under test may swallow the error)


def _is_local(address: object) -> bool:
    if not isinstance(address, tuple) or not address:
        return True  # AF_UNIX paths and the like
    host = str(address[0])
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _refuse(address: object) -> RuntimeError:
    _blocked.append(repr(address))
    return RuntimeError(f"test tried to open a non-loopback connection to {address!r}")


def _guarded_connect(self: socket.socket, address: object) -> None:
    if not _is_local(address):
        raise _refuse(address)
    return _real_connect(self, address)  # type: ignore[arg-type]  # the address a caller gave, passed on as is


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    if not _is_local(address):
        raise _refuse(address)
    return _real_connect_ex(self, address)  # type: ignore[arg-type]  # the address a caller gave, passed on as is


@pytest.fixture(autouse=True)
def _offline_env(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Cost map local, DSPy cache in a temp dir and off on disk, MEMENTO_* cleared, no non-loopback sockets.

    Each test runs in an empty working directory: nothing may depend on the checkout being the cwd (a subprocess
    ``python -c "import memento..."`` started in the checkout would import the source folder ``memento/`` instead of
    the installed package), and no test can leave ``./memento.toml``, ``runs/`` or ``memento_memory/`` behind.
    """
    import dspy

    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    monkeypatch.setenv("MEMENTO_WEB_CACHE_DIR", str(tmp_path_factory.mktemp("web_cache")))
    cache_dir = tmp_path_factory.mktemp("dspy_cache")
    monkeypatch.setenv("DSPY_CACHEDIR", str(cache_dir))
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    for key in list(os.environ):
        if (key.startswith("MEMENTO_") and key != "MEMENTO_WEB_CACHE_DIR") or key.endswith("_API_KEY"):
            monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded_connect_ex)
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    dspy.configure(lm=None, callbacks=[], adapter=None)
    _blocked.clear()
    # the structured adapter remembers each server's response_format dialect by its URL: a test server reusing an
    # earlier test's port must not inherit that server's dialect
    from memento.llm import structured_adapter

    structured_adapter._dialects.clear()
    yield
    attempts, _blocked[:] = list(_blocked), []
    if attempts and not request.node.get_closest_marker("network_guard_test"):
        pytest.fail(f"non-loopback connection attempted (and refused): {', '.join(attempts[:3])}", pytrace=False)


@pytest.fixture
def engine() -> ScriptedEngine:
    """A fresh scripted engine."""
    return ScriptedEngine()


@pytest.fixture
def lm(engine: ScriptedEngine):
    """A dspy.LM answering from ``engine``; configured as DSPy's default LM."""
    import dspy

    model = scripted_lm(engine)
    dspy.configure(lm=model)
    return model


@pytest.fixture
def openai_server(engine: ScriptedEngine) -> Iterator[OpenAICompatServer]:
    """A local OpenAI-compatible chat server on 127.0.0.1 answering from ``engine``."""
    with OpenAICompatServer(engine) as server:
        yield server


# -- PostgreSQL: one throwaway server per test session, a fresh database per test ---------------------------------
_pg_state: dict[str, object] = {}


def _ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _fail_or_skip(message: str) -> None:
    if _ci():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def postgres_server():
    """A scratch PostgreSQL server (:class:`memento.execution.local_postgres.LocalPostgres`) for the whole session.

    Started as the ``postgres`` user under root, listening on 127.0.0.1, its files in a directory of ``/tmp`` that
    user can reach (not pytest's 0700 folders). Without the server binaries or psycopg the PostgreSQL tests skip,
    and fail instead under ``CI=true`` (.ci/run installs both).
    """
    import shutil
    import tempfile

    from memento.core.errors import ConfigError
    from memento.execution.local_postgres import LocalPostgres
    from memento.utils.extras import has_extra

    if not has_extra("postgres"):
        message = 'PostgreSQL tests need psycopg: pip install "memento-dspy[postgres]"'
        _fail_or_skip(message)
    root = tempfile.mkdtemp(prefix="memento-pg-", dir="/tmp")
    try:
        server = LocalPostgres(root).start()
    except (ConfigError, OSError) as exc:
        shutil.rmtree(root, ignore_errors=True)
        message = f"PostgreSQL tests need a local server (apt-get install postgresql): {exc}"
        _fail_or_skip(message)
    yield server
    server.destroy()


@pytest.fixture
def pg_location(postgres_server, request: pytest.FixtureRequest):
    """``pg_location(name="mem")``: the location (a :class:`~memento.memory.location.PostgresLocation`; ``str()`` gives
    the DSN) of a fresh database of the session's server, one per name and test (the same name gives the same
    database within a test)."""
    from memento.memory.location import parse_location

    made: dict[str, Location] = {}
    counter = _pg_state.setdefault("n", [0])

    def make(name: str = "mem") -> Location:
        if name not in made:
            counter[0] += 1  # type: ignore[index]
            made[name] = parse_location(postgres_server.create_database(f"t{counter[0]}_{os.getpid()}"))  # type: ignore[index]
        return made[name]

    return make


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    """The storage backend a store test runs on (the tests that take it run once per backend)."""
    return str(request.param)


@pytest.fixture
def location(backend: str, tmp_path, request: pytest.FixtureRequest):
    """``location(name="mem")``: where a test's memory lives on ``backend``: ``tmp_path / name`` (SQLite) or a
    fresh PostgreSQL database per name (a location string)."""
    if backend == "sqlite":
        return lambda name="mem": tmp_path / name
    return request.getfixturevalue("pg_location")
