"""How the `corral` command draws on a terminal: tables, grids, times, JSON, failures.

Both the CLI commands (`corral.cli`) and the demo (`corral.demo`) print through these, so
they live apart from either: the demo must not import the CLI that calls it.
"""

from __future__ import annotations

import datetime
import json
from typing import Any

import click
import rich.box
import rich.console
import rich.markup
import rich.table
import rich.text

#: table columns whose cells may wrap when the terminal is narrow
_WRAPPABLE = frozenset({"NAME", "REASON", "MESSAGE", "END REASON"})


class Failure(click.ClickException):
    """An expected error: one red line on stderr and exit status 1, never a traceback."""

    def show(self, file: Any = None) -> None:
        rich.console.Console(stderr=True, highlight=False).print(
            rich.text.Text(f"error: {self.message}", style="red"), soft_wrap=True
        )


def console() -> rich.console.Console:
    console = rich.console.Console(highlight=False)
    if not console.is_terminal:
        # Piped output goes to grep and files: rows must not be folded to fit 80 columns.
        console.width = max(console.width, 240)
    return console


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
    phase, secondary = status.get("phase") or "?", status.get("secondary_phase")
    return f"{phase}/{secondary}" if secondary and secondary != phase else phase


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
    return "-" if value is None or value == "" else str(value)


def compact(value: Any) -> str:
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return cell(value)


def esc(text: str) -> str:
    """Server text shown inside rich markup: a `[name]` in it must not be taken as a style."""
    return rich.markup.escape(text)


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
