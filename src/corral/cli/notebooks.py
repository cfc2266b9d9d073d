"""`corral notebook ...`: JupyterLab on the platform, that stops by itself.

A NOTEBOOK argument is a notebook's id, or its name where one notebook of the project has
it. Durations are written `4h`, `90m`, `2h30m` or `45s`.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import click

from corral.cli import render
from corral.domain import errors, notebooks
from corral.sdk import notebooks as notebook_api

if TYPE_CHECKING:
    from corral.cli.state import State


def _api(state: State) -> notebook_api.Notebooks:
    return notebook_api.Notebooks(state.connect())


def _ms(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return notebooks.parse_duration(text)
    except errors.BadParameter as exc:
        raise click.BadParameter(exc.message) from None


def _lease(lease: str | None, idle: str | None) -> tuple[int | None, str | None]:
    if lease and idle:
        raise click.UsageError("give --lease or --idle, not both")
    if idle:
        return _ms(idle), "idle"
    return _ms(lease), ("timing" if lease else None)


def _resolve(state: State, ref: str) -> str:
    """The id of the notebook `ref` names (an id, or a name one notebook has)."""
    found = _api(state).list(name=ref)["data"]
    named = [nb for nb in found if nb["name"] == ref or nb["id"] == ref]
    if len(named) > 1:
        raise render.Failure(f"{len(named)} notebooks are named '{ref}': give an id")
    return str(named[0]["id"]) if named else ref


def _lease_words(nb: dict[str, Any]) -> str:
    lease = nb.get("lease") or {}
    kind = lease.get("type", "timing")
    ms = lease.get("duration") or 0
    return f"{kind} {notebooks.duration_words(int(ms))}"


@click.group(short_help="JupyterLab notebooks that stop by themselves.")
def notebook() -> None:
    """JupyterLab notebooks on the platform's resources, that stop by themselves."""


@notebook.command(short_help="Create a notebook and start it.")
@click.argument("name")
@click.option("--flavor", required=True, help="resource flavor (`corral flavors`)")
@click.option("--image", help="engine that runs JupyterLab (default: the server's)")
@click.option("--lease", help="stop after this long (default 4h)")
@click.option("--idle", help="stop after this long with nothing happening, instead")
@click.option("--pool", help="resource pool")
@click.option("--description", default="")
@render.json_option()
@click.pass_obj
def create(state: State, name: str, flavor: str, image: str | None, lease: str | None,
           idle: str | None, pool: str | None, description: str, as_json: bool) -> None:
    """Create notebook NAME and start its first session; prints its id."""
    duration, kind = _lease(lease, idle)
    body: dict[str, Any] = {"name": name, "description": description, "flavor": flavor}
    if image:
        body["image_id"] = image
    if pool:
        body["pool_id"] = pool
    if kind:
        body["lease"] = {"duration": duration, "type": kind}
    nb = _api(state).create(body)
    if as_json:
        render.print_json(nb)
        return
    state.out.print(nb["id"])


@notebook.command("list", short_help="List the project's notebooks.")
@render.json_option()
@click.pass_obj
def list_(state: State, as_json: bool) -> None:
    """List the project's notebooks, newest first."""
    found = _api(state).list()
    if as_json:
        render.print_json(found)
        return
    table = render.table("ID", "NAME", "STATUS", "FLAVOR", "LEASE", "STOPS AT", "REASON")
    for nb in found["data"]:
        table.add_row(nb["id"], render.esc(nb["name"]), nb["status"], nb["flavor"],
                      _lease_words(nb), render.time_ms(nb.get("stops_at")),
                      render.esc(render.cell(nb.get("fail_reason") or nb.get("stop_reason"))))
    state.out.print(table)


@notebook.command(short_help="Show a notebook.")
@click.argument("ref", metavar="NOTEBOOK")
@render.json_option()
@click.pass_obj
def show(state: State, ref: str, as_json: bool) -> None:
    """Show a notebook: status, lease, when it stops, its workspace, why it stopped."""
    nb = _api(state).get(_resolve(state, ref))
    if as_json:
        render.print_json(nb)
        return
    rows = [("id", nb["id"]), ("name", nb["name"]), ("status", nb["status"]),
            ("flavor", nb["flavor"]), ("engine", nb["image"]["id"]),
            ("lease", _lease_words(nb)), ("stops at", render.time_ms(nb.get("stops_at"))),
            ("workspace", nb["volume"].get("mount_path")),
            ("session job", nb.get("job_id")),
            ("reason", nb.get("fail_reason") or nb.get("stop_reason"))]
    for step in nb.get("action_progress") or []:
        rows.append((f"step {step['step']}", f"{step['status']}: {step['description']}"))
    for key, value in rows:
        state.out.print(f"{key + ':':13} {render.esc(render.cell(value))}")


@notebook.command("open", short_help="Print the URL that opens a notebook.")
@click.argument("ref", metavar="NOTEBOOK")
@click.pass_obj
def open_(state: State, ref: str) -> None:
    """Print the notebook's one-time URL: opened in a browser, it logs that browser in to
    the notebook (for its current session)."""
    nb = _api(state).get(_resolve(state, ref))
    if not nb.get("token"):
        raise render.Failure(f"notebook {nb['id']} is {nb['status']}: it has no URL to open "
                             "(start it, or ask its owner)")
    click.echo(nb["url"])


@notebook.command(short_help="Stop a notebook (its workspace stays).")
@click.argument("ref", metavar="NOTEBOOK")
@click.pass_obj
def stop(state: State, ref: str) -> None:
    """Stop a notebook's session: JupyterLab shuts down, its resources are freed."""
    nb = _api(state).stop(_resolve(state, ref))
    state.out.print(f"{nb['id']} {nb['status']}")


@notebook.command(short_help="Start a stopped notebook.")
@click.argument("ref", metavar="NOTEBOOK")
@click.option("--lease", help="stop after this long (default: its lease)")
@click.option("--idle", help="stop after this long with nothing happening, instead")
@click.pass_obj
def start(state: State, ref: str, lease: str | None, idle: str | None) -> None:
    """Start a new session of a stopped notebook, in the same workspace."""
    duration, kind = _lease(lease, idle)
    nb = _api(state).start(_resolve(state, ref), duration_ms=duration, lease_type=kind)
    state.out.print(f"{nb['id']} {nb['status']}")


@notebook.command(short_help="Give a running notebook more time.")
@click.argument("ref", metavar="NOTEBOOK")
@click.argument("more", metavar="DURATION")
@click.pass_obj
def extend(state: State, ref: str, more: str) -> None:
    """Move a running notebook's stop time DURATION later (its timing lease)."""
    extra = _ms(more)
    assert extra is not None
    api = _api(state)
    notebook_id = _resolve(state, ref)
    lease = api.lease(notebook_id)
    if lease.get("type") != "timing" or not lease.get("stops_at"):
        raise render.Failure(f"notebook {notebook_id} has no timing lease running: start it "
                             "with --lease to give its next session one")
    left = max(0, int(lease["stops_at"]) - round(time.time() * 1000))
    renewed = api.renew(notebook_id, left + extra)
    state.out.print(f"{notebook_id} stops at {render.time_ms(renewed.get('stops_at'))}")


@notebook.command(short_help="Delete a notebook.")
@click.argument("ref", metavar="NOTEBOOK")
@click.pass_obj
def delete(state: State, ref: str) -> None:
    """Delete a notebook (a running one is stopped first); its workspace folder stays."""
    nb = _api(state).delete(_resolve(state, ref))
    state.out.print(f"{nb['id']} {nb['status']}")


COMMANDS = [notebook]
