"""`corral login`, `whoami`, `token`, `projects`, `users` and `keys`: who uses the server,
in which projects, with which credentials.

`login` keeps its credential in `$CORRAL_HOME/credentials.json` (`corral.cli.credentials`);
every other command sends it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click
import rich.table

from corral.cli import render
from corral.sdk import client, credentials

if TYPE_CHECKING:
    from corral.cli.state import State

ROLES = click.Choice(["viewer", "member", "admin"])


@click.command(short_help="Log in with a token or an access key pair.")
@click.option("--token", help="a bearer token (what `corral users create` printed)")
@click.option("--access-key", help="an access key (with --secret-key)")
@click.option("--secret-key", help="its secret key")
@click.option("--project", help="project id or name (default: the key's, or your first)")
@render.json_option()
@click.pass_obj
def login(state: State, token: str | None, access_key: str | None, secret_key: str | None,
          project: str | None, as_json: bool) -> None:
    """Log in to the server (--url, else CORRAL_URL) with a token or an access key pair;
    the credential is kept in CORRAL_HOME for the commands that follow."""
    if not token and not (access_key and secret_key):
        raise click.UsageError("give --token, or --access-key and --secret-key")
    url = state.settings.url
    with client.Client(url, "-", token=token, access_key=access_key,
                       secret_key=secret_key) as api:
        me = api.whoami()
    projects = me.get("projects") or []
    chosen = [p for p in projects if project in (None, p["project_id"], p["name"])]
    if not chosen:
        raise render.Failure(f"you are in no project {project!r}" if project
                             else "you are in no project yet: ask a platform admin")
    login = credentials.Login(project_id=chosen[0]["project_id"], user=me["user"], url=url,
                              token=token, access_key=access_key, secret_key=secret_key)
    credentials.write(state.settings.credentials_file, login)
    if as_json:
        render.print_json({"user": me["user"], "project_id": login.project_id, "url": url})
    else:
        state.out.print(f"logged in to {url} as [bold]{render.esc(me['user'])}[/], project "
                        f"{render.esc(chosen[0]['name'])} ({login.project_id}), "
                        f"role {chosen[0]['role']}")


@click.command(short_help="Show who you are logged in as.")
@render.json_option()
@click.pass_obj
def whoami(state: State, as_json: bool) -> None:
    """Show who the current login is, with their projects and roles."""
    me = state.connect().whoami()
    if as_json:
        render.print_json(me)
        return
    admin = " (platform admin)" if me.get("is_admin") else ""
    state.out.print(f"[bold]{render.esc(me['user'])}[/]{admin}, with a {me['credential']}")
    state.out.print(_projects_table(me.get("projects") or []))


@click.command(short_help="Print a bearer token of the current login.")
@click.option("--new", is_flag=True, help="always make a new token")
@click.option("--ttl", type=click.IntRange(min=60), help="seconds the new token lives")
@click.pass_obj
def token(state: State, new: bool, ttl: int | None) -> None:
    """Print a bearer token of the current login, e.g. for curl -H "X-Auth-Token: ...".

    The login's own token when it has one; else (a key-pair login) a new token, bound to
    the key's project, which is kept in the login for next time.
    """
    login = state.login()
    if login is None:
        raise render.Failure("not logged in: run `corral login` first")
    if login.token and not new:
        click.echo(login.token)
        return
    made = state.connect().create_token("corral token", ttl)
    if not login.token and ttl is None:
        login.token = made["token"]
        credentials.write(state.settings.credentials_file, login)
    click.echo(made["token"])


def _projects_table(projects: list[dict[str, Any]]) -> rich.table.Table:
    table = render.table("ID", "NAME", "ROLE", "CREATED")
    for p in projects:
        table.add_row(p["project_id"], render.esc(p["name"]), render.cell(p.get("role")),
                      render.time_ms(p.get("created_at")))
    return table


@click.group(invoke_without_command=True, short_help="List your projects, or manage them.")
@render.json_option()
@click.pass_context
def projects(ctx: click.Context, as_json: bool) -> None:
    """List your projects; a platform admin manages them with the subcommands."""
    if ctx.invoked_subcommand is None:
        state: State = ctx.obj
        found = state.connect().projects()
        if as_json:
            render.print_json(found)
        else:
            state.out.print(_projects_table(found["projects"]))


@projects.command(name="create", short_help="Create a project (platform admin).")
@click.argument("name")
@render.json_option()
@click.pass_obj
def projects_create(state: State, name: str, as_json: bool) -> None:
    """Create a project named NAME (platform admin)."""
    made = state.connect().create_project(name)
    if as_json:
        render.print_json(made)
    else:
        state.out.print(f"created project {render.esc(name)} ({made['project_id']})")


@projects.command(name="add-member", short_help="Give a user a role in a project.")
@click.argument("project")
@click.argument("user")
@click.option("--role", type=ROLES, default="member", show_default=True,
              help="what USER may do in PROJECT")
@click.pass_obj
def projects_add_member(state: State, project: str, user: str, role: str) -> None:
    """Give USER ROLE in PROJECT (id or name), or change their role (platform admin)."""
    state.connect().set_member(project, user, role)
    state.out.print(f"{render.esc(user)} is {role} in {render.esc(project)}")


@projects.command(name="remove-member", short_help="Take a user out of a project.")
@click.argument("project")
@click.argument("user")
@click.pass_obj
def projects_remove_member(state: State, project: str, user: str) -> None:
    """Take USER out of PROJECT; their keys for it are revoked (platform admin)."""
    state.connect().remove_member(project, user)
    state.out.print(f"{render.esc(user)} is no longer in {render.esc(project)}")


@click.group(invoke_without_command=True, short_help="List users, or manage them (admin).")
@render.json_option()
@click.pass_context
def users(ctx: click.Context, as_json: bool) -> None:
    """List users (platform admin); create and disable them with the subcommands."""
    if ctx.invoked_subcommand is None:
        state: State = ctx.obj
        found = state.connect().users()
        if as_json:
            render.print_json(found)
            return
        table = render.table("NAME", "ADMIN", "PROJECTS")
        for u in found["users"]:
            table.add_row(render.esc(u["name"]), "yes" if u["is_admin"] else "",
                          ", ".join(f"{p}:{r}" for p, r in u["projects"].items()))
        state.out.print(table)


@users.command(name="create", short_help="Create a user and print their first token.")
@click.argument("name")
@click.option("--project", "project_names", multiple=True,
              help="project id or name (repeatable; default: the login's project)")
@click.option("--role", type=ROLES, default="member", show_default=True,
              help="what the user may do in those projects")
@click.option("--admin", "is_admin", is_flag=True, help="a platform admin")
@render.json_option()
@click.pass_obj
def users_create(state: State, name: str, project_names: tuple[str, ...], role: str,
                 is_admin: bool, as_json: bool) -> None:
    """Create a user and print their first token (shown only now)."""
    api = state.connect()
    made = api.create_user(name, {p: role for p in project_names or (api.project_id,)},
                           is_admin)
    if as_json:
        render.print_json(made)
        return
    state.out.print(f"created {render.esc(name)}; give them this token (shown only now), "
                    f"for `corral login --token ...`:")
    click.echo(made["token"])


@users.command(name="disable", short_help="Disable a user and all their credentials.")
@click.argument("name")
@click.pass_obj
def users_disable(state: State, name: str) -> None:
    """Disable a user: all their keys and tokens stop working at once."""
    state.connect().disable_user(name)
    state.out.print(f"disabled {render.esc(name)}")


@click.group(short_help="Create, list and revoke access key pairs.")
def keys() -> None:
    """Access key pairs of the login's project, for the ModelArts SDKs."""


@keys.command(name="create", short_help="Create an access key pair.")
@render.json_option("print access_key, secret_key and project_id as JSON")
@click.option("--description", default="", help="what the key is for")
@click.pass_obj
def keys_create(state: State, description: str, as_json: bool) -> None:
    """Create an access key pair of yours; its secret key is shown only now."""
    made = state.connect().create_key(description)
    if as_json:
        render.print_json({k: made[k] for k in ("access_key", "secret_key", "project_id")})
        return
    grid = render.grid()
    for k in ("access_key", "secret_key", "project_id"):
        grid.add_row(k, made[k])
    state.out.print(grid)
    state.out.print("[dim]the secret key is shown only now[/]")


@keys.command(name="list", short_help="List access keys, never their secrets.")
@render.json_option()
@click.pass_obj
def keys_list(state: State, as_json: bool) -> None:
    """List your keys of the project (a project admin sees everyone's); never secrets."""
    found = state.connect().keys()
    if as_json:
        render.print_json(found)
        return
    table = render.table("ACCESS KEY", "USER", "CREATED", "REVOKED", "DESCRIPTION")
    for k in found["keys"]:
        table.add_row(k["access_key"], render.esc(k["user_name"]),
                      render.time_ms(k["created_at"]),
                      render.time_ms(k["revoked_at"]) if k.get("revoked_at") else "",
                      render.esc(k["description"]))
    state.out.print(table)


@keys.command(name="revoke", short_help="Revoke an access key at once.")
@click.argument("access_key")
@click.pass_obj
def keys_revoke(state: State, access_key: str) -> None:
    """Revoke an access key: it stops working at once."""
    state.connect().revoke_key(access_key)
    state.out.print(f"revoked {access_key}")


COMMANDS = (login, whoami, token, projects, users, keys)
