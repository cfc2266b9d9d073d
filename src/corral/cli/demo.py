"""`corral demo`: train the example MLP on a server of its own and sum up the run.

The demo starts an embedded server (or uses the one already serving this CORRAL_HOME),
submits examples/mlp, shows its phases and log as they come and ends with a summary of the
run: phase, duration, resource peaks, final training metrics, where the model went. That is
a few hundred lines of watching and summing up which no other command needs, so it lives
here rather than in `corral.cli.serve`, whose `demo` command only calls `run`.
"""

from __future__ import annotations

import contextlib
import datetime
import pathlib
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import rich.console
import rich.status
import rich.text

import corral
from corral import settings as settings_mod
from corral.cli import jobfile, render
from corral.domain import errors, jobs
from corral.sdk import client, credentials

#: the resource metrics the server samples, and how a value of each is shown
_UNITS: dict[str, Callable[[float], str]] = {
    "cpuUsage": lambda v: f"{v:.1f}%", "memUsage": lambda v: f"{v:.1f}%",
    "gpuUtil": lambda v: f"{v:.1f}%", "gpuMemUsage": lambda v: f"{v:.1f}%",
    "memUsedMB": render.memory_mb,
}
_FINAL = re.compile(r"^final:\s*(.*)$", re.MULTILINE)


def run(
    settings: settings_mod.Settings, out: rich.console.Console, epochs: int | None, as_json: bool
) -> None:
    """Train the example MLP on an embedded server and sum up the run on `out`.

    Raises `render.Failure` when the demo cannot run or its job does not complete.
    """
    job_file = pathlib.Path(corral.__file__).parents[2] / "examples" / "mlp" / "job.yaml"
    if not job_file.is_file():
        raise render.Failure(
            f"the demo job is missing: {job_file} (run from a corral source checkout)"
        )
    name = "demo-" + datetime.datetime.now().strftime("%Y%m%d-%H%M%S-%f")[:-3]
    out_dir = settings.home / "demo" / name / "output"
    body = _demo_body(jobfile.load_job_file(job_file), name, out_dir, epochs)
    say = _quiet if as_json else out.print
    with _term_as_interrupt(), _demo_server(settings, say) as url, \
            _client(settings, url) as api:
        job = api.create_job(body)
        job_id = job["metadata"]["id"]
        say(f"submitted [bold]{name}[/] ({job_id}); output goes to {render.esc(str(out_dir))}")
        progress = Progress(out, quiet=as_json)
        try:
            job = progress.watch(api, job_id)
        except KeyboardInterrupt:
            api.terminate(job_id)
            raise render.Failure(f"interrupted: stopped the demo job {job_id}") from None
        summary = _demo_summary(api, job, "".join(progress.log), out_dir, url)
    if as_json:
        render.print_json(summary)
    else:
        _show_summary(out, summary)
    if summary["phase"] != jobs.Phase.COMPLETED.value:
        raise render.Failure(
            f"the demo job ended {summary['phase']}: {summary['reason'] or 'see above'}"
        )


def _client(settings: settings_mod.Settings, url: str) -> client.Client:
    """A client with the credential the server wrote in this CORRAL_HOME (or a login)."""
    login = credentials.read(settings.credentials_file)
    if login is None:
        return client.Client(url)
    return client.Client(url, login.project_id, token=login.token,
                         access_key=login.access_key, secret_key=login.secret_key)


def _quiet(*args: Any, **kwargs: Any) -> None:
    pass


def _demo_body(
    body: dict[str, Any], name: str, out_dir: pathlib.Path, epochs: int | None
) -> dict[str, Any]:
    """The example job renamed (names are unique) and writing under CORRAL_HOME, not the repo."""
    body["metadata"]["name"] = name
    for channel in body["algorithm"].get("outputs", []):
        if channel["name"] == "train_url":
            channel["remote"] = {"obs": {"obs_url": str(out_dir) + "/"}}
    if epochs is not None:
        params = [p for p in body["algorithm"].get("parameters", []) if p["name"] != "epochs"]
        body["algorithm"]["parameters"] = [*params, {"name": "epochs", "value": str(epochs)}]
    return body


@contextlib.contextmanager
def _term_as_interrupt() -> Iterator[None]:
    """SIGTERM (a terminal closed, a process manager) stops the demo as Ctrl-C does: its
    job is stopped and its server with it, instead of the process dying with both left."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(_signum: int, _frame: Any) -> None:
        raise KeyboardInterrupt

    before = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


@contextlib.contextmanager
def _demo_server(settings: settings_mod.Settings, say: Callable[..., None]) -> Iterator[str]:
    """An in-process server for the demo, or the one that already serves this CORRAL_HOME."""
    from corral import server

    # Loopback only, on a free port; samples often enough that a job of seconds has some.
    update = {"host": "127.0.0.1", "metrics_interval": min(settings.metrics_interval, 1.0)}
    try:
        embedded = server.start_embedded(settings.model_copy(update=update))
    except server.AlreadyRunning as exc:
        if not exc.url:
            raise render.Failure(
                f"{exc.message}, and it left no address to reach it at"
            ) from None
        say(f"using the corral server already running at {exc.url}")
        yield exc.url
        return
    except errors.CorralError as exc:
        raise render.Failure(f"cannot start the demo server: {exc.message}") from None
    say(f"started a corral server at {embedded.url} (home: {settings.home})")
    try:
        yield embedded.url
    finally:
        embedded.stop()


class Progress:
    """The demo's live view: a line per phase change, the log as it comes, a spinner."""

    def __init__(self, out: rich.console.Console, quiet: bool) -> None:
        self.out, self.quiet = out, quiet
        self.lines = LineBuffer()
        self.log: list[str] = []
        self.label = ""
        self.started = time.monotonic()
        self.status: rich.status.Status | None = None

    def watch(self, api: client.Client, job_id: str) -> dict[str, Any]:
        """Follows the job to its end and returns it; its whole log is in `self.log`."""
        spinner = contextlib.nullcontext(None) if self.quiet else self.out.status("submitted")
        with spinner as self.status:
            tail = client.LogTail(api, job_id, jobfile.FIRST_TASK)
            job = client.follow(api, job_id, tail, self.on_text, self.on_job)
        if rest := self.lines.flush():
            self._line(rest)
        self._announce(job)  # the final phase comes after the last lines it explains
        return job

    def on_job(self, job: dict[str, Any]) -> None:
        label = render.phase_label(job["status"])
        if job["status"]["phase"] not in client.TERMINAL:
            self._announce(job)
        if self.status is not None:
            self.status.update(f"{label} for {time.monotonic() - self.started:.0f}s")

    def on_text(self, text: str) -> None:
        self.log.append(text)
        for line in self.lines.feed(text):
            self._line(line)

    def _announce(self, job: dict[str, Any]) -> None:
        label, reason = render.phase_label(job["status"]), job["status"].get("reason")
        if label != self.label:
            self.label = label
            self._say(
                f"[bold cyan]●[/] {label}"
                + (f" [dim]({render.esc(reason)})[/]" if reason else "")
            )

    def _line(self, line: str) -> None:
        if not self.quiet:
            self.out.print(rich.text.Text(f"  │ {line}", style="dim"), soft_wrap=True)

    def _say(self, markup: str) -> None:
        if not self.quiet:
            self.out.print(markup)


class LineBuffer:
    """Turns chunks of text into whole lines (a chunk may end mid-line)."""

    def __init__(self) -> None:
        self.rest = ""

    def feed(self, text: str) -> list[str]:
        *lines, self.rest = (self.rest + text).split("\n")
        return [line.rstrip("\r") for line in lines]

    def flush(self) -> str:
        rest, self.rest = self.rest, ""
        return rest


def _demo_summary(
    api: client.Client, job: dict[str, Any], log: str, out_dir: pathlib.Path, url: str
) -> dict[str, Any]:
    status = job["status"]
    model = out_dir / "model.npz"
    try:
        resources = resource_summary(api.metrics(job["metadata"]["id"], jobfile.FIRST_TASK))
    except client.ClientError:
        resources = {}  # the summary is still worth showing without samples
    job_id, completed = job["metadata"]["id"], status.get("phase") == jobs.Phase.COMPLETED
    return {
        "server": url,
        "job_id": job["metadata"]["id"],
        "name": job["metadata"]["name"],
        "phase": status.get("phase"),
        "secondary_phase": status.get("secondary_phase"),
        "reason": status.get("reason"),
        "duration_ms": status.get("duration"),
        "resources": resources,
        "training": final_metrics(log),
        "model": str(model) if model.is_file() else None,
        "output_dir": str(out_dir),
        "registered": _registered(api, job["metadata"]["name"]) if completed else None,
        "reported": _reported(api, job_id),
    }


def _registered(api: client.Client, name: str, wait: float = 30.0) -> dict[str, Any] | None:
    """The model version the completed job was registered as (shortly after it ends)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            v = api.model_version(name, "latest")
        except client.ClientError as exc:
            if exc.status != 404 or time.monotonic() > deadline:
                return None
            time.sleep(0.2)
            continue
        return {"name": name, "version": v["version"], "location": v["location"]}


def _reported(api: client.Client, job_id: str) -> dict[str, Any]:
    """The last values of the training metrics the job reported."""
    try:
        return dict(api.training_metrics(job_id).get("final_metrics") or {})
    except client.ClientError:
        return {}


def _show_summary(out: rich.console.Console, s: dict[str, Any]) -> None:
    ok = s["phase"] == jobs.Phase.COMPLETED.value
    grid = render.grid()
    label = render.phase_label({"phase": s["phase"], "secondary_phase": s["secondary_phase"]})
    grid.add_row("phase", f"[{'green' if ok else 'red'}]{label}[/]")
    if s["reason"]:
        grid.add_row("reason", render.esc(s["reason"]))
    grid.add_row("duration", render.duration(s["duration_ms"]))
    for metric, v in s["resources"].items():
        shown = _UNITS.get(metric, str)
        if v["peak"] or metric in ("cpuUsage", "memUsage"):  # no GPU rows on a CPU job
            grid.add_row(metric, f"last {shown(v['last'])}, peak {shown(v['peak'])}")
    if not s["resources"]:
        grid.add_row("resources", "[dim]no samples (the job was shorter than one interval)[/]")
    if s["training"]:
        grid.add_row("training", "  ".join(f"{k}={v}" for k, v in s["training"].items()))
    model = s["model"] or f"[red]not written[/] (expected in {s['output_dir']})"
    grid.add_row("model", model)
    if s.get("registered"):
        reg = s["registered"]
        grid.add_row("registered", f"model {render.esc(reg['name'])} version {reg['version']}"
                     f" ({render.esc(reg['location'])}); corral models show {reg['name']}")
    out.print()
    out.print(f"[bold]{s['name']}[/] ({s['job_id']})")
    out.print(grid)


def resource_summary(metrics: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Last and peak of every sampled metric (cpuUsage, memUsage, ...)."""
    result = {}
    for m in metrics.get("metrics", []):
        if m.get("metric") not in _UNITS:  # the series the job reported: not resources
            continue
        values = [v for v in m.get("value") or [] if v is not None]
        if values:
            result[m["metric"]] = {"last": values[-1], "peak": max(values)}
    return result


def final_metrics(log: str) -> dict[str, Any]:
    """`key=value` pairs of the last `final: ...` line a training script printed."""
    found = _FINAL.findall(log.replace("\r\n", "\n"))
    if not found:
        return {}
    pairs = (item.split("=", 1) for item in found[-1].split() if "=" in item)
    return {k: _number(v) for k, v in pairs}


def _number(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text
