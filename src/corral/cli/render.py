"""How the `corral` command draws on a terminal: tables, grids, phases, memory, JSON, failures.

Every command and the demo (`corral.cli.demo`) print through these, so that a thing is
shown the same way wherever it appears: one unit for memory (GiB, one decimal), one label
for a phase. They live apart from the commands: the demo must not import the CLI that
calls it.
"""

from __future__ import annotations

import datetime
import json
import re
import sys
from collections.abc import Callable
from typing import Any, TextIO, TypeVar, cast

import click
import rich.box
import rich.console
import rich.markup
import rich.table
import rich.text

#: table columns whose cells may wrap when the terminal is narrow
_WRAPPABLE = frozenset({"NAME", "REASON", "MESSAGE", "END REASON"})
#: how wide piped output may be: wide enough that no row is folded
_PIPED_WIDTH = 10_000
#: secondary phases that only restate their phase (a Pending job is always Queuing)
_RESTATED = frozenset({("Pending", "Queuing")})
#: memory units the server may give, in GiB (corral's "GB" are GiB: 1 GB = 1024 MB)
_GIB = {"GB": 1.0, "GiB": 1.0, "MB": 1 / 1024, "MiB": 1 / 1024, "TB": 1024.0, "TiB": 1024.0}

F = TypeVar("F", bound=Callable[..., Any])


class Failure(click.ClickException):
    """An expected error: one red line on stderr and exit status 1, never a traceback."""

    def show(self, file: Any = None) -> None:
        rich.console.Console(stderr=True, highlight=False).print(
            rich.text.Text(f"error: {self.message}", style="red"), soft_wrap=True
        )


def json_option(text: str = "print JSON instead of text") -> Callable[[F], F]:
    """The `--json` flag that every command which shows something has."""
    return click.option("--json", "as_json", is_flag=True, help=text)


def console() -> rich.console.Console:
    """The console for stdout: drawn to the terminal's width, or plain when piped."""
    console = rich.console.Console(highlight=False)
    if console.is_terminal:
        return console
    # Piped output goes to grep and files: rows are neither folded to a width nor padded
    # to one.
    # rich needs no more of a file than _Trimmed has (write, flush, isatty, encoding).
    piped = cast(TextIO, _Trimmed())
    return rich.console.Console(highlight=False, file=piped, width=_PIPED_WIDTH)


class _Trimmed:
    """stdout (whatever it is at the time) without the spaces that rich pads the end of
    every table row with."""

    _LINE_END = re.compile(r" +\n")

    def write(self, text: str) -> int:
        sys.stdout.write(self._LINE_END.sub("\n", text))
        return len(text)

    def flush(self) -> None:
        sys.stdout.flush()

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return getattr(sys.stdout, "encoding", None) or "utf-8"


def table(*columns: str) -> rich.table.Table:
    table = rich.table.Table(box=rich.box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for i, col in enumerate(columns):
        # Ids are copied into other commands: never wrapped; free text may wrap.
        table.add_column(col, no_wrap=i == 0 or col not in _WRAPPABLE, overflow="fold")
    return table


def grid() -> rich.table.Table:
    grid = rich.table.Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    return grid


def print_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, ensure_ascii=False))


def phase_label(status: dict[str, Any]) -> str:
    """The phase, with the secondary phase in brackets where it says more:
    `Completed`, `Pending`, `Failed (CreateFailed)`, `Abnormal (Lost)`."""
    phase, secondary = status.get("phase") or "?", status.get("secondary_phase")
    if not secondary or secondary == phase or (phase, secondary) in _RESTATED:
        return str(phase)
    return f"{phase} ({secondary})"


def memory(gib: Any) -> str:
    """An amount of memory in GiB, the one unit the CLI shows memory in: one decimal, two
    under 0.1 GiB (a small process's 20 MB is 0.02 GiB, not 0.0)."""
    if not isinstance(gib, int | float):
        return "-"
    if 0 < gib < 0.005:
        return "< 0.01 GiB"
    return f"{gib:.2f} GiB" if 0 < gib < 0.1 else f"{gib:.1f} GiB"


def memory_mb(mb: Any) -> str:
    return memory(mb / 1024) if isinstance(mb, int | float) else "-"


def memory_sized(size: Any, unit: Any) -> str:
    """A ModelArts `{size, unit}` memory field (flavors say `"unit": "GB"`) in GiB."""
    try:
        return memory(float(size) * _GIB[str(unit)])
    except (KeyError, TypeError, ValueError):
        return cell(f"{size} {unit}".strip() if size is not None else None)


def time_ms(ms: Any) -> str:
    return time_s(ms / 1000) if isinstance(ms, int | float) and ms > 0 else "-"


def time_s(s: Any) -> str:
    if not isinstance(s, int | float) or s <= 0:
        return "-"
    return datetime.datetime.fromtimestamp(s).strftime("%Y-%m-%d %H:%M:%S")


def time_any(value: Any) -> str:
    """Event times: epoch milliseconds, or a string the server already formatted."""
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    return time_ms(value) if isinstance(value, int | float) else cell(value)


def duration(ms: Any) -> str:
    if not isinstance(ms, int | float) or ms <= 0:
        return "-"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{sec:02d}s"


def cell(value: Any) -> str:
    """A table cell: `-` for a missing or empty value."""
    return "-" if value is None or value == "" or value == {} or value == [] else str(value)


def compact(value: Any) -> str:
    if isinstance(value, dict | list) and value:
        return json.dumps(value, separators=(",", ":"))
    return cell(value)


def esc(text: str) -> str:
    """Server text shown inside rich markup: a `[name]` in it must not be taken as a style."""
    return rich.markup.escape(text)


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
