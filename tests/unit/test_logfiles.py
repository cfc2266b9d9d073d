"""A log read in pieces: windows of whole lines either side of an offset, and a search
that goes on from where it stopped."""

from __future__ import annotations

import pathlib

from corral.storage import logfiles


def write(tmp_path: pathlib.Path, data: bytes) -> pathlib.Path:
    path = tmp_path / "worker-0.log"
    path.write_bytes(data)
    return path


LINES = b"".join(b"line %03d\n" % i for i in range(100))  # 9 bytes a line


def test_the_last_lines_start_at_a_line(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, LINES)
    w = logfiles.before(path, 10**12, 50)
    assert w.data == b"".join(b"line %03d\n" % i for i in range(95, 100))
    assert (w.start, w.end, w.size) == (95 * 9, 900, 900)


def test_windows_before_an_offset_tile_the_file_back_to_its_start(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, LINES)
    end, pieces = 900, []
    while end > 0:
        w = logfiles.before(path, end, 100)
        assert w.end == end and w.start < end
        pieces.insert(0, w.data)
        end = w.start
    assert b"".join(pieces) == LINES


def test_windows_after_an_offset_end_after_a_line(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, LINES)
    w = logfiles.after(path, 9, 40)
    assert w.data == b"line 001\nline 002\nline 003\nline 004\n"
    start, pieces = 0, []
    while start < 900:
        w = logfiles.after(path, start, 100)
        pieces.append(w.data)
        start = w.end
    assert b"".join(pieces) == LINES


def test_a_line_being_written_is_given_up_to_a_whole_character(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, "done\nhalf é".encode()[:-1])  # é cut in two
    w = logfiles.after(path, 0, 1000)
    assert w.data == b"done\nhalf "
    path.write_bytes("done\nhalf é".encode())
    assert logfiles.after(path, w.end, 1000).data == "é".encode()


def test_a_line_longer_than_the_window_is_shown_in_pieces(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, b"a" * 1000 + b"\nend\n")
    w = logfiles.before(path, 1000, 100)
    assert w.data == b"a" * 100 and w.start == 900
    w = logfiles.after(path, 0, 100)
    assert w.data == b"a" * 100


def test_search_finds_lines_and_says_where_to_go_on(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, LINES)
    found = logfiles.search(path, b"LINE 05", start=0, max_scan=10**9, limit=5,
                            ignore_case=True)
    assert [m.line for m in found.matches] == [b"line 050", b"line 051", b"line 052",
                                               b"line 053", b"line 054"]
    assert found.matches[0].offset == 50 * 9 and found.next_offset == 55 * 9
    rest = logfiles.search(path, b"line 05", start=found.next_offset, max_scan=10**9, limit=50)
    assert [m.line for m in rest.matches] == [b"line %03d" % i for i in range(55, 60)]
    assert rest.next_offset == rest.size == 900
    assert logfiles.search(path, b"LINE", start=0, max_scan=10**9, limit=5).matches == []


def test_search_reads_a_bounded_stretch_a_call(tmp_path: pathlib.Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(logfiles, "BLOCK", 64)
    path = write(tmp_path, LINES)
    offset, seen, calls = 0, [], 0
    while offset < 900:
        found = logfiles.search(path, b"7", start=offset, max_scan=200, limit=1000)
        assert found.next_offset > offset
        seen += [m.line for m in found.matches]
        offset, calls = found.next_offset, calls + 1
    assert calls > 3  # the file was searched in several calls
    assert seen == [b"line %03d" % i for i in range(100) if b"7" in b"%03d" % i]


def test_no_file_is_an_empty_log(tmp_path: pathlib.Path) -> None:
    missing = tmp_path / "nope.log"
    assert logfiles.before(missing, 10, 10).data == b""
    assert logfiles.search(missing, b"x", start=0, max_scan=10, limit=1).matches == []


def test_a_link_planted_in_the_log_s_place_is_not_read(tmp_path: pathlib.Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"secret\n")
    (tmp_path / "worker-0.log").symlink_to(secret)
    assert logfiles.after(tmp_path / "worker-0.log", 0, 100).data == b""
    assert logfiles.open_log(tmp_path / "worker-0.log") is None


def test_an_open_log_follows_its_growth_from_the_file_it_opened(tmp_path: pathlib.Path) -> None:
    """A followed log is opened once: each look is an fstat of that file, each read a
    pread of it. Its path is not walked again, so a link planted in its place later (or
    the folder moved away) changes nothing of what is read."""
    path = tmp_path / "logs" / "worker-0.log"
    opened = logfiles.OpenLog(path)
    assert opened.size() == 0 and opened.after(0, 100).data == b""  # not written yet
    path.parent.mkdir()
    with open(path, "ab", buffering=0) as writer:
        writer.write(b"one\n")
        assert opened.size() == 4
        assert opened.after(0, 100).data == b"one\n"
        moved = tmp_path / "moved"
        path.parent.rename(moved)
        secret = tmp_path / "secret"
        secret.write_bytes(b"secret\n" * 10)
        path.parent.mkdir()
        path.symlink_to(secret)
        writer.write(b"two\nthr")  # the task goes on writing, a line unfinished
        assert opened.size() == 11
        win = opened.after(4, 100)
        assert (win.data, win.start, win.end, win.size) == (b"two\nthr", 4, 11, 11)
    # Opened afresh (another attempt's log), the path is checked for links again.
    opened.move_to(tmp_path / "logs" / "worker-1.log")
    opened.move_to(path)
    assert opened.size() == 0 and opened.after(0, 100).data == b""
    opened.close()


def test_an_open_log_reads_a_window_of_whole_lines(tmp_path: pathlib.Path) -> None:
    opened = logfiles.OpenLog(write(tmp_path, LINES))
    win = opened.after(9, 40)
    assert win.data == LINES[9:45] and (win.start, win.end, win.size) == (9, 45, 900)
    opened.close()


def test_where_the_line_holding_a_byte_starts(tmp_path: pathlib.Path) -> None:
    path = write(tmp_path, b"one\ntwo\npar")
    assert logfiles.line_start(path, 11, 100) == 8  # the end: the line being written
    assert logfiles.line_start(path, 8, 100) == 8  # a line's start is its own
    assert logfiles.line_start(path, 6, 100) == 4
    assert logfiles.line_start(path, 2, 100) == 0
    assert logfiles.line_start(path, 11, 2) == 11  # no break that close: where it was
    assert logfiles.line_start(path, 10**12, 100) == 8  # past the end: the end
    assert logfiles.line_start(tmp_path / "nope.log", 5, 100) == 0
