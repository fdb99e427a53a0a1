"""The CLI refuses bad input with a clear error before any workflow starts (no server is running
here: reaching Temporal would fail differently)."""

from __future__ import annotations

import pytest

import starter


@pytest.mark.parametrize("argv, message", [
    (["run", "  "], "question is empty"),
    (["run", "x" * 2100], "question is longer than 2000 characters"),
    (["start", "What is the GIL?", "--seed-url", "ftp://example.org/x"], "must start with http"),
    (["start", "What is the GIL?", "--seed-url", "http://"], "has no host"),
    (["extend", "some-id", "-3"], "minutes must be > 0"),
])
def test_bad_input_is_refused_before_connecting(argv, message, capsys, monkeypatch):
    monkeypatch.setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")  # nothing listens there
    assert starter.main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Temporal" not in err


def test_unknown_mode_is_refused_by_the_parser(capsys):
    with pytest.raises(SystemExit) as info:
        starter.main(["run", "What is the GIL?", "--mode", "huge"])
    assert info.value.code == 2
    assert "invalid choice: 'huge'" in capsys.readouterr().err


def test_workflow_id_is_derived_from_the_question():
    wid = starter.workflow_id_for("How do I use pathlib's rglob?")
    assert wid.startswith("research-how-do-i-use-pathlib-s-rglob-")


def test_no_server_is_a_clear_error_not_a_traceback(capsys, monkeypatch):
    monkeypatch.setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")  # nothing listens there
    assert starter.main(["status", "some-id"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error:") and "Traceback" not in err
