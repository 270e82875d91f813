"""envbuild/cli/_text.py: check's plain text wraps to the terminal and colours only where wanted."""

from __future__ import annotations

import io

import pytest

from envbuild.cli._text import Text, printable


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_not_a_terminal_is_80_columns_without_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("COLUMNS", "NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    out = Text(io.StringIO())
    assert out.width == 80 and not out.color
    lines = out.grid([("key", "word " * 40), ("longer key", "v")])
    assert all(len(line) <= 80 for line in lines)
    assert lines[0].startswith("key         word") and lines[1].startswith(" " * 12 + "word")
    assert lines[-1] == "longer key  v"


def test_colour_follows_no_color_force_color_and_term(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm")
    assert Text(Tty()).style("ok", "bold", "green") == "\x1b[1;32mok\x1b[0m"
    monkeypatch.setenv("NO_COLOR", "1")
    assert Text(Tty()).style("ok", "green") == "ok"
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert not Text(Tty()).color
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert Text(io.StringIO()).color


def test_columns_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    out = Text(io.StringIO())
    assert out.width == 40 and all(len(line) <= 40 for line in out.wrap("word " * 30))


def test_control_characters_are_shown_escaped() -> None:
    assert printable("a\x1b[31mb") == "a\\x1b[31mb"
    assert printable("plain text") == "plain text"
