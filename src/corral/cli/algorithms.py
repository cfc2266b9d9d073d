"""`corral algorithms ...`: saved job configurations that jobs name (`submit --algorithm`).

An ALGORITHM argument is an algorithm's name, or its id.
"""

from __future__ import annotations

import pathlib
from typing import TYPE_CHECKING, Any

import click

from corral.cli import jobfile, render
from corral.domain import algorithms as algorithm_spec
from corral.sdk import algorithms

if TYPE_CHECKING:
    from corral.cli.state import State


def load_algorithm_file(file: pathlib.Path) -> dict[str, Any]:
    """The algorithm body in `file`, its relative code_dir made absolute from its folder."""
    body = jobfile.load_body(file, algorithm_spec.AlgorithmBody, "a ModelArts algorithm body")
    config = body.get("job_config")
    if isinstance(config, dict):
        # job_config's code_dir and boot_file read as a job's algorithm's do
        resolved = jobfile.resolve_paths({"algorithm": config}, file.absolute().parent)
        body["job_config"] = resolved["algorithm"]
    return body


@click.group(name="algorithms",
             short_help="Algorithms: saved code, engine, parameters and channels.")
def algorithms_group() -> None:
    """Algorithms: a job's code (code_dir + boot_file, or command), engine, parameters
    with defaults and constraints, and input and output channels, saved under a name. A
    job made from one (`corral submit FILE --algorithm NAME`) gives its data, outputs and
    the parameters it changes."""


@algorithms_group.command(name="create", short_help="Save an algorithm described in a file.")
@click.argument("file", type=click.Path(path_type=pathlib.Path))
@render.json_option()
@click.pass_obj
def create_algorithm(state: State, file: pathlib.Path, as_json: bool) -> None:
    """Save the algorithm FILE describes (the ModelArts create body, JSON or YAML:
    metadata, job_config, resource_requirements, advanced_config). Relative paths in
    job_config are taken from FILE's folder."""
    made = algorithms.create(state.connect(), load_algorithm_file(file))
    if as_json:
        render.print_json(made)
        return
    meta = made["metadata"]
    state.out.print(f"algorithm [bold]{render.esc(meta['name'])}[/] saved as "
                    f"[bold]{meta['id']}[/]")


@algorithms_group.command(name="list", short_help="List the project's algorithms.")
@click.option("--name", help="only algorithms whose name holds this")
@click.option("--limit", type=click.IntRange(1, algorithms.PAGE), default=algorithms.PAGE,
              show_default=True)
@render.json_option()
@click.pass_obj
def list_algorithms(state: State, name: str | None, limit: int, as_json: bool) -> None:
    found = algorithms.page(state.connect(), limit=limit,
                            searches=f"name:{name}" if name else None)
    if as_json:
        render.print_json(found)
        return
    table = render.table("ID", "NAME", "CODE", "PARAMETERS", "USER", "UPDATED")
    for item in found.get("items", []):
        meta, cfg = item["metadata"], item["job_config"]
        table.add_row(meta["id"], render.esc(meta["name"]), render.esc(_code(cfg)),
                      render.esc(", ".join(p["name"] for p in cfg.get("parameters", []))),
                      render.esc(meta.get("user_name") or ""),
                      render.time_ms(meta.get("update_time")))
    state.out.print(table)


def _code(cfg: dict[str, Any]) -> str:
    boot = str(cfg.get("boot_file") or "")
    if cfg.get("code_dir") and not boot.startswith("/") and "://" not in boot:
        return f"{cfg['code_dir'].rstrip('/')}/{boot}"  # a boot file named within its folder
    return boot or str(cfg.get("command") or "")


@algorithms_group.command(name="show", short_help="Show an algorithm.")
@click.argument("algorithm")
@render.json_option()
@click.pass_obj
def show_algorithm(state: State, algorithm: str, as_json: bool) -> None:
    found = algorithms.find(state.connect(), algorithm)
    if as_json:
        render.print_json(found)
        return
    meta, cfg = found["metadata"], found["job_config"]
    grid = render.grid()
    for key in ("id", "name", "description", "user_name"):
        grid.add_row(key.replace("_", " "), render.esc(render.cell(meta.get(key))))
    grid.add_row("code", render.esc(_code(cfg)))
    engine = cfg.get("engine") or {}
    if engine.get("image_url"):
        grid.add_row("image", render.esc(engine["image_url"]))
    else:
        grid.add_row("engine", render.esc(engine.get("engine_id") or " ".join(
            filter(None, (engine.get("engine_name"), engine.get("engine_version"))))
            or "default"))
    for p in cfg.get("parameters", []):
        grid.add_row(f"--{render.esc(p['name'])}", render.esc(_parameter(p)))
    for kind in ("inputs", "outputs"):
        for ch in cfg.get(kind, []):
            grid.add_row(kind[:-1], render.esc(f"{ch['name']}  {ch.get('description') or ''}"))
    for need in found.get("resource_requirements", []):
        grid.add_row("needs", render.esc(f"{need['key']} in {', '.join(need['value'])}"))
    grid.add_row("updated", render.time_ms(meta.get("update_time")))
    state.out.print(grid)


def _parameter(p: dict[str, Any]) -> str:
    """`0.05  Float in [0.0001, 1], required  learning rate`"""
    c = p.get("constraint") or {}
    rules = [c["type"]] if c.get("type") else []
    if c.get("valid_type") == "Range":
        rules.append(f"in [{', '.join(c['valid_range'])}]")
    elif c.get("valid_type") == "Enumeration":
        rules.append(f"one of {', '.join(c['valid_range'])}")
    rules += [flag for flag, on in (("required", c.get("required")),
                                    ("fixed", c.get("editable") is False)) if on]
    return "  ".join(filter(None, (repr(p.get("value", "")), " ".join(rules),
                                   p.get("description") or "")))


@algorithms_group.command(name="update", short_help="Replace an algorithm with a file's.")
@click.argument("algorithm")
@click.argument("file", type=click.Path(path_type=pathlib.Path))
@click.pass_obj
def update_algorithm(state: State, algorithm: str, file: pathlib.Path) -> None:
    """Replace ALGORITHM with what FILE describes (a rename too). Jobs made from it keep
    what they took."""
    api = state.connect()
    found = algorithms.find(api, algorithm)
    made = algorithms.update(api, found["metadata"]["id"], load_algorithm_file(file))
    state.out.print(f"algorithm [bold]{render.esc(made['metadata']['name'])}[/] updated")


@algorithms_group.command(name="delete", short_help="Delete an algorithm.")
@click.argument("algorithm")
@click.pass_obj
def delete_algorithm(state: State, algorithm: str) -> None:
    """Delete ALGORITHM. Jobs made from it keep what they took; its code stays."""
    api = state.connect()
    found = algorithms.find(api, algorithm)
    algorithms.delete(api, found["metadata"]["id"])
    state.out.print(f"deleted algorithm {render.esc(found['metadata']['name'])} "
                    "(jobs made from it are kept)")


COMMANDS = (algorithms_group,)
