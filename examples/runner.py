"""What each example's `run.py` shares: a corral server of its own, and the `corral`
commands of the example run against it as a user types them (each printed first).

The server runs in this process on a temporary CORRAL_HOME, removed at the end; give
`--home DIR` to keep it (its models, the pipelines' outputs) and look around afterwards
with `CORRAL_HOME=DIR corral server` and the same commands. Files an example writes for
its jobs (their outputs) go into `work`, a folder beside the home (`DIR-work`): a job may
not write into CORRAL_HOME itself (docs/storage.md).

An example reaches the server from a script of its own through `api`, the client `corral`
uses, logged in as the server's first admin, as the commands are.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import pathlib
import shlex
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import TextIO, TypeVar

import click

from corral import server, settings
from corral.cli import main, state
from corral.sdk import client

T = TypeVar("T")


class Session:
    def __init__(self, home: pathlib.Path, url: str) -> None:
        self.settings = settings.Settings(home=home, url=url)
        self.home = home
        self.work = home.with_name(home.name + "-work")
        self.work.mkdir(parents=True, exist_ok=True)
        self.api: client.Client = state.State(self.settings).connect()

    def corral(self, *args: str) -> int:
        """Run `corral ARGS...`; its exit status."""
        click.echo(f"\n$ corral {shlex.join(args)}")
        try:
            main.cli.main(list(args), prog_name="corral", obj=state.State(self.settings),
                          standalone_mode=False)
        except click.ClickException as exc:
            exc.show()
            return exc.exit_code
        except SystemExit as exc:
            return int(exc.code or 0)
        return 0

    def output(self, *args: str) -> str:
        """Run `corral ARGS...` as `corral` does, and what it printed; a failure ends the
        example."""
        tee = _Tee(sys.stdout)
        with contextlib.redirect_stdout(tee):
            status = self.corral(*args)
        if status != 0:
            raise SystemExit(f"`corral {shlex.join(args)}` failed ({status})")
        return tee.getvalue()


class _Tee(io.StringIO):
    """stdout, that also keeps what went through it."""

    def __init__(self, out: TextIO) -> None:
        super().__init__()
        self.out = out

    def write(self, text: str) -> int:
        self.out.write(text)
        return super().write(text)

    def flush(self) -> None:
        self.out.flush()


def wait(what: str, check: Callable[[], T | None], timeout: float = 60) -> T:
    """What `check` answers once it answers something (polled); gives up after `timeout`
    seconds, ending the example."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise SystemExit(f"gave up waiting for {what}")


@contextlib.contextmanager
def session(argv: list[str], description: str) -> Iterator[Session]:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--home", type=pathlib.Path,
                   help="the server's CORRAL_HOME, kept afterwards (default: a temporary one)")
    args = p.parse_args(argv)
    logging.getLogger("corral").setLevel(logging.ERROR)
    with contextlib.ExitStack() as stack:
        home = args.home or pathlib.Path(stack.enter_context(
            tempfile.TemporaryDirectory(prefix="corral-example-"))) / "home"
        home = home.absolute()
        embedded = server.start_embedded(settings.Settings(home=home))
        stack.callback(embedded.stop)
        click.echo(f"a corral server of its own at {embedded.url} (CORRAL_HOME={home})")
        yield Session(home, embedded.url)
