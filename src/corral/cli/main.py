"""The `corral` command: the click group every command hangs off, and what they share.

Everything except `corral server` and `corral demo` talks to a running server over HTTP
through `corral.sdk.client`, found at the `url` setting (`CORRAL_URL`, `--url`) or else at
the server of the current `corral login`. The commands live in modules by noun (`jobs`,
`catalog`, `scheduling`, `access`, `models`, `serve`); each gets a `state.State` as
click's context object, and none imports this module, which imports them all. A usage
error exits with 2 (click's own); any other expected failure (an error answer, an
unreachable server, a bad job file) prints one red line and exits with 1; a traceback
means a bug. docs/cli.md is the reference.
"""

from __future__ import annotations

from typing import Any

import click
import pydantic

import corral
from corral import settings as settings_mod
from corral.cli import (
    access,
    algorithms,
    catalog,
    compare,
    datasets,
    gc,
    il,
    jobs,
    models,
    notebooks,
    pipelines,
    render,
    scheduling,
    search,
    serve,
    state,
)
from corral.sdk import client


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except client.ClientError as exc:
            raise render.Failure(str(exc)) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--url", help="server to talk to (default: CORRAL_URL, else the login's)")
@click.version_option(corral.__version__, prog_name="corral")
@click.pass_context
def cli(ctx: click.Context, url: str | None) -> None:
    """corral: a self-hosted AI training platform with a ModelArts-compatible API.

    A JOB argument is a job's id, or its name where one live job of the project has it.
    Exit status: 0 done, 1 an error (or, for `logs -f`, a job that did not complete),
    2 a usage error.
    """
    if ctx.obj is None:
        # `main()` normally builds the settings; this serves callers that invoke `cli` directly.
        ctx.obj = state.State(settings_mod.load())
    obj = ctx.find_object(state.State)
    assert obj is not None
    if url:
        obj.settings = obj.settings.model_copy(update={"url": url})
        obj.api = None


for _module in (serve, jobs, catalog, scheduling, access, models, gc, datasets, il, pipelines,
                notebooks, search, compare, algorithms):
    for _command in _module.COMMANDS:
        cli.add_command(_command)


def main() -> None:
    try:
        settings = settings_mod.load()
    except (OSError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        render.Failure(f"bad corral settings: {_settings_problem(exc)}").show()
        raise SystemExit(1) from None
    cli.main(prog_name="corral", obj=state.State(settings))


def _settings_problem(exc: Exception) -> str:
    if isinstance(exc, pydantic.ValidationError):
        return "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors(include_url=False)
        )
    return render.one_line(exc)
