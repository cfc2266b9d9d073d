"""What each example's `run.py` shares: a corral server of its own, and the `corral`
commands of the example run against it as a user types them (each printed first).

The server runs in this process on a temporary CORRAL_HOME, removed at the end; give
`--home DIR` to keep it (its models, the pipelines' outputs) and look around afterwards
with `CORRAL_HOME=DIR corral server` and the same commands.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import pathlib
import shlex
import tempfile
from collections.abc import Iterator

import click

from corral import server, settings
from corral.cli import main


class Session:
    def __init__(self, home: pathlib.Path, url: str) -> None:
        self.settings = settings.Settings(home=home, url=url)

    def corral(self, *args: str) -> int:
        """Run `corral ARGS...`; its exit status."""
        click.echo(f"\n$ corral {shlex.join(args)}")
        try:
            main.cli.main(list(args), prog_name="corral", obj=main.State(self.settings),
                          standalone_mode=False)
        except click.ClickException as exc:
            exc.show()
            return exc.exit_code
        except SystemExit as exc:
            return int(exc.code or 0)
        return 0


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
        embedded = server.start_embedded(settings.Settings(home=home))
        stack.callback(embedded.stop)
        click.echo(f"a corral server of its own at {embedded.url} (CORRAL_HOME={home})")
        yield Session(home, embedded.url)
