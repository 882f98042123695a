"""Reading a file a user hands to a command: regular files only, inside the directory given, under a cap."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pau_mcp.userfiles import UnreadableFile, printable, read_bytes, read_text


def test_a_regular_file_within_its_cap_is_read(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello")
    assert read_text(tmp_path / "a.txt", limit=5, inside=tmp_path) == "hello"


def test_a_fifo_is_refused_at_once_rather_than_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(UnreadableFile, match="pipe is a FIFO: give a regular file"):
        read_bytes(tmp_path / "pipe", limit=100)


def test_a_device_that_never_ends_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnreadableFile, match="/dev/zero is a character device"):
        read_bytes(Path("/dev/zero"), limit=100)
    (tmp_path / "zero").symlink_to("/dev/zero")
    with pytest.raises(UnreadableFile, match="leads outside"):
        read_bytes(tmp_path / "zero", limit=100, inside=tmp_path)


def test_a_link_out_of_the_directory_is_refused_and_one_within_it_followed(tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("secret")
    inner = tmp_path / "checkout"
    (inner / "sub").mkdir(parents=True)
    (inner / "sub" / "real.txt").write_text("fine")
    (inner / "out.txt").symlink_to(tmp_path / "outside.txt")
    (inner / "in.txt").symlink_to(inner / "sub" / "real.txt")
    with pytest.raises(UnreadableFile, match=r"out.txt leads outside .*checkout \(to .*outside.txt\)"):
        read_text(inner / "out.txt", limit=100, inside=inner)
    with pytest.raises(UnreadableFile, match="leads outside"):
        read_text(inner / "sub" / ".." / ".." / "outside.txt", limit=100, inside=inner)
    assert read_text(inner / "in.txt", limit=100, inside=inner) == "fine"


def test_a_file_over_its_cap_is_refused_whatever_size_it_claims(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 101)
    with pytest.raises(UnreadableFile, match="big is 101 bytes long; at most 100 bytes are read"):
        read_bytes(tmp_path / "big", limit=100)
    # Files of /proc claim a size of 0: the cap holds while reading.
    with pytest.raises(UnreadableFile, match="longer than 10 bytes"):
        read_bytes(Path("/proc/self/status"), limit=10)


def test_a_directory_a_missing_file_and_bytes_that_are_not_text_are_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "latin").write_bytes(b"caf\xe9")
    for path, expected in (
        (tmp_path, "is a directory"),
        (tmp_path / "missing", "cannot read .*missing: No such file"),
        (tmp_path / "latin", r"is not utf-8 text \(byte 3 cannot be decoded\)"),
    ):
        with pytest.raises(UnreadableFile, match=expected) as refused:
            read_text(path, limit=100)
        assert "\n" not in str(refused.value)


def test_a_name_is_shown_with_its_control_characters_as_escapes() -> None:
    assert printable("plain naïve name.py") == "plain naïve name.py"
    shown = printable("\x1b[31mred\x07\u202eevil\nname.py")
    assert shown == "\\x1b[31mred\\x07\\u202eevil\\nname.py"
    assert shown.isprintable()
