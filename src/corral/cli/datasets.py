"""`corral datasets ...`: index files of samples that incremental-learning jobs watch, and
their versions (the samples frozen, for training jobs to read)."""

from __future__ import annotations

import pathlib
from typing import IO, TYPE_CHECKING

import click

from corral.cli import render
from corral.sdk import incremental

if TYPE_CHECKING:
    from corral.cli.state import State


@click.group(short_help="Datasets: index files of samples, one a line.")
def datasets() -> None:
    """Datasets: an index file (txt, or csv with a header) of samples, one a line, local or
    s3://, with its number of samples. Incremental-learning jobs watch them; training jobs
    read their versions."""


@datasets.command(name="list", short_help="List the project's datasets.")
@render.json_option()
@click.pass_obj
def list_datasets(state: State, as_json: bool) -> None:
    found = incremental.datasets(state.connect())
    if as_json:
        render.print_json(found)
        return
    table = render.table("NAME", "SAMPLES", "FORMAT", "URL", "UPDATED")
    for d in found.get("datasets", []):
        table.add_row(d["name"], str(d["number_of_samples"]), d["format"],
                      render.esc(d["url"]), render.time_ms(d.get("update_time")))
    state.out.print(table)


@datasets.command(name="create", short_help="Make a dataset of an index file.")
@click.argument("name")
@click.argument("url")
@click.option("--format", "fmt", type=click.Choice(["txt", "csv"]),
              help="default: csv for a .csv file, else txt")
@click.option("--description", default="")
@click.option("--empty", is_flag=True, help="make the local file (empty) when it is missing")
@render.json_option()
@click.pass_obj
def create_dataset(state: State, name: str, url: str, fmt: str | None, description: str,
                   empty: bool, as_json: bool) -> None:
    """Make dataset NAME of the index file URL (a local path, relative ones taken from
    here, or an s3:// URL)."""
    if "://" not in url:
        path = pathlib.Path(url).expanduser().absolute()
        if empty and not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        url = str(path)
    made = incremental.create_dataset(state.connect(), name, url, fmt, description)
    if as_json:
        render.print_json(made)
        return
    state.out.print(f"dataset [bold]{render.esc(made['name'])}[/]: "
                    f"{made['number_of_samples']} sample(s) in {render.esc(made['url'])}")


@datasets.command(name="show", short_help="Show a dataset and its number of samples.")
@click.argument("name")
@render.json_option()
@click.pass_obj
def show_dataset(state: State, name: str, as_json: bool) -> None:
    found = incremental.dataset(state.connect(), name)
    if as_json:
        render.print_json(found)
        return
    grid = render.grid()
    for key in ("id", "name", "description", "url", "format", "number_of_samples",
                "user_name", "message"):
        grid.add_row(key.replace("_", " "), render.esc(render.cell(found.get(key))))
    grid.add_row("updated", render.time_ms(found.get("update_time")))
    state.out.print(grid)


@datasets.command(name="append", short_help="Append samples to a dataset.")
@click.argument("name")
@click.argument("samples", nargs=-1)
@click.option("-f", "--file", "source", type=click.File("r"),
              help="read the samples from this file, one a line ('-': stdin)")
@click.pass_obj
def append_samples(state: State, name: str, samples: tuple[str, ...],
                   source: IO[str] | None) -> None:
    """Append SAMPLES (or the lines of --file) to dataset NAME, each a sample."""
    lines = list(samples)
    if source is not None:
        lines += [line.rstrip("\r\n") for line in source if line.strip()]
    if not lines:
        raise click.UsageError("give samples, or --file")
    done = incremental.append(state.connect(), name, lines)
    state.out.print(f"appended {done['appended']}: {name} has {done['number_of_samples']} "
                    "sample(s)")


@datasets.command(name="delete", short_help="Forget a dataset (its file stays).")
@click.argument("name")
@click.pass_obj
def delete_dataset(state: State, name: str) -> None:
    incremental.delete_dataset(state.connect(), name)
    state.out.print(f"deleted dataset {name} (its file stays)")


@datasets.group(name="version", short_help="A dataset's versions: its samples frozen.")
def version() -> None:
    """A version freezes the samples a dataset holds when it is made: later appends do not
    change it. A job reads one as an input: remote: {dataset: {id: NAME, version_id: V0001}}."""


@version.command(name="create", short_help="Freeze the dataset's samples as a new version.")
@click.argument("name")
@click.option("--description", default="")
@render.json_option()
@click.pass_obj
def create_version(state: State, name: str, description: str, as_json: bool) -> None:
    made = incremental.create_dataset_version(state.connect(), name, description)
    if as_json:
        render.print_json(made)
        return
    state.out.print(f"dataset [bold]{render.esc(name)}[/] version {made['version_name']}: "
                    f"{made['number_of_samples']} sample(s), {made['content_hash']} "
                    f"(id {made['version_id']})")


@version.command(name="list", short_help="List the dataset's versions.")
@click.argument("name")
@render.json_option()
@click.pass_obj
def list_versions(state: State, name: str, as_json: bool) -> None:
    found = incremental.dataset_versions(state.connect(), name)
    if as_json:
        render.print_json(found)
        return
    table = render.table("VERSION", "SAMPLES", "CONTENT HASH", "ID", "CREATED", "DESCRIPTION")
    for v in found.get("versions", []):
        table.add_row(v["version_name"], str(v["number_of_samples"]), v["content_hash"][:19],
                      v["version_id"], render.time_ms(v.get("create_time")),
                      render.esc(v.get("description") or ""))
    state.out.print(table)


@version.command(name="show", short_help="Show a version of a dataset and its files.")
@click.argument("name")
@click.argument("version_ref", metavar="VERSION")
@render.json_option()
@click.pass_obj
def show_version(state: State, name: str, version_ref: str, as_json: bool) -> None:
    """Show VERSION (its name, V0002, its number or its id) of dataset NAME."""
    found = incremental.dataset_version(state.connect(), name, version_ref)
    if as_json:
        render.print_json(found)
        return
    grid = render.grid()
    for key in ("version_name", "version_id", "dataset_name", "description", "format",
                "number_of_samples", "size_bytes", "content_hash", "location", "user_name"):
        grid.add_row(key.replace("_", " "), render.esc(render.cell(found.get(key))))
    grid.add_row("created", render.time_ms(found.get("create_time")))
    for f in found.get("files", []):
        grid.add_row("file", render.esc(f"{f['path']}  {f['size']} B  sha256:{f['sha256']}"))
    state.out.print(grid)


@version.command(name="delete", short_help="Delete a version of a dataset and its files.")
@click.argument("name")
@click.argument("version_ref", metavar="VERSION")
@click.pass_obj
def delete_version(state: State, name: str, version_ref: str) -> None:
    """Delete VERSION (its name, V0002, its number or its id) of dataset NAME, and its
    files; refused while a job that has not ended reads it. Its number is not given to a
    later version."""
    incremental.delete_dataset_version(state.connect(), name, version_ref)
    state.out.print(f"deleted dataset {name} version {version_ref}")


COMMANDS = (datasets,)
