"""`corral server` and `corral demo`: the two commands that run corral on this machine
rather than talk to a server that is already running."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from corral.cli import demo, render
from corral.domain import errors

if TYPE_CHECKING:
    from corral.cli.state import State


@click.command(name="server", short_help="Run the corral server in the foreground.")
@click.option("--host", help="address to listen on (default: the CORRAL_HOST setting)")
@click.option("--port", type=int, help="port to listen on (default: the CORRAL_PORT setting)")
@click.option("--ray", "ray_address", metavar="ADDRESS",
              help="run the default pool's jobs on this Ray cluster: auto, HOST:PORT or "
                   "ray://HOST:PORT (default: the CORRAL_RAY_ADDRESS setting)")
@click.pass_obj
def run_server(state: State, host: str | None, port: int | None, ray_address: str | None) -> None:
    """Run the corral server in the foreground, until Ctrl-C or SIGTERM."""
    # Imported here so that client commands do not pay for loading the whole server.
    from corral import server

    update = {k: v for k, v in (("host", host), ("port", port), ("ray_address", ray_address))
              if v is not None}
    try:
        server.serve(state.settings.model_copy(update=update))
    except errors.CorralError as exc:  # already running, port taken, database unreachable
        raise render.Failure(exc.message) from None


@click.command(name="demo", short_help="Train the example MLP and sum up the run.")
@click.option("--epochs", type=int, help="override the example's number of epochs")
@render.json_option("print only a JSON summary")
@click.pass_obj
def run_demo(state: State, epochs: int | None, as_json: bool) -> None:
    """Train the example MLP on an embedded server (or the one already serving this
    CORRAL_HOME) and sum up the run: phase, resources, metrics, where the model went."""
    demo.run(state.settings, state.out, epochs, as_json)


COMMANDS = (run_server, run_demo)
