"""The process-wide cancel flag and the signal handlers that set it."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from memento.core import cancel
from memento.core.errors import Cancelled


@pytest.fixture(autouse=True)
def _clean_flag():
    cancel.reset_cancel()
    yield
    cancel.reset_cancel()


def test_flag_is_shared_by_threads_and_check_raises() -> None:
    cancel.check_cancelled()  # no cancel yet: nothing happens
    seen: list[bool] = []
    t = threading.Thread(target=lambda: seen.append(cancel.wait_cancelled(5)))
    t.start()
    cancel.request_cancel()
    t.join(2)
    assert seen == [True]
    assert cancel.cancel_requested()
    with pytest.raises(Cancelled, match="cancelled"):
        cancel.check_cancelled()
    # Cancelled is not an Exception: per-example "record and go on" handlers let it through
    assert not isinstance(Cancelled(), Exception)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signals_set_the_flag_and_the_exit_code(sig: int, code: int) -> None:
    with cancel.handle_signals():
        os.kill(os.getpid(), sig)
        assert cancel.wait_cancelled(2)
        with pytest.raises(Cancelled, match=signal.Signals(sig).name):
            cancel.check_cancelled()
    assert cancel.cancel_exit_code() == code
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_second_sigint_interrupts_at_once() -> None:
    with cancel.handle_signals():
        os.kill(os.getpid(), signal.SIGINT)
        cancel.wait_cancelled(2)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            cancel.wait_cancelled(2)
