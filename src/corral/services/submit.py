"""Turning a create body into a stored job, or refusing it with nothing changed.

Everything that can be known to fail at submit is checked here (flavor, engine, whether
it could ever fit, that its code and inputs exist), so a job that is accepted only waits
for resources. Object-storage URLs are checked for form and for a configured store; their
content is fetched before the job is admitted (see `scheduler.storage`), and a missing
object fails the job then.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil

import sqlalchemy as sa

from corral import settings
from corral.domain import algorithms, errors, jobs, models, resources, specs
from corral.domain.search import spec as search_spec
from corral.services import catalog as catalog_mod
from corral.services import dataset_versions, tensorboards
from corral.storage import objects, paths, runs
from corral.store import (
    algorithm_repo,
    identity_repo,
    job_repo,
    model_repo,
    rows,
    search_repo,
    version_repo,
)

#: the value of `jobs.staging` while a job's remote inputs are still to be fetched
STAGING_PENDING = "pending"


@dataclasses.dataclass(frozen=True)
class Places:
    """Where a job's fetched inputs and pending outputs are kept, the object stores that
    s3:// URLs resolve to, and the model registry's defaults."""

    runs_dir: pathlib.Path
    stores: objects.Stores | None = None
    model_channel: str = "train_url"

    def job_dir(self, job_id: str) -> pathlib.Path:
        return self.runs_dir / job_id


@dataclasses.dataclass(frozen=True)
class NewVersion:
    """A job created as a later version of a family (see `domain.versions`)."""

    family_id: str
    number: int
    parent: rows.Version  #: the version it is made from
    resume: bool
    output_bases: dict[str, str]


def family_owner(conn: sa.Connection, version: rows.Version) -> str:
    """Who may make new versions of a family (with its project's admins): the owner of its
    first version. A new version joins the family and writes into its outputs, so making
    one is a change to that job, whichever of its versions it starts from."""
    first = job_repo.job_by_id(conn, version.family_id)
    return first.user_name if first is not None else ""


def create_job(conn: sa.Connection, cat: catalog_mod.Catalog, body: specs.JobCreate, *,
               project_id: str, now: int, user_name: str = "",
               policy: paths.Policy | None = None, places: Places | None = None,
               version: NewVersion | None = None,
               owner: tuple[str, str, str] | None = None) -> str:
    """Validate and insert a job in phase Creating; returns its id.

    With a `policy`, every local path must be one the project may use. `owner`: the job
    kind, the object and the role of a job a controller owns (kinds/owned.py).
    """
    identity_repo.require_project(conn, project_id)
    flavor = cat.flavor(body.spec.resource.flavor_id)
    node_count = body.spec.resource.node_count
    made_of = None
    if version is None:  # a version keeps what its family took from its algorithm
        body, made_of = from_algorithm(conn, body, project_id, strict=owner is None)
    if made_of is not None:
        algorithms.check_resources(made_of.metadata.name, made_of.resource_requirements,
                                   gpu=flavor.gpu, node_count=node_count)
    pool = cat.pool(body.spec.resource.pool_id)
    check_requirements(cat, body, pool)
    check_image(cat, body.algorithm.engine, pool=pool, flavor=flavor)
    gpu_type = flavor.gpu_product if flavor.gpu else ""
    check_fits(cat, pool, body.spec.resource.node_name, flavor, node_count)
    sched = body.spec.schedule_policy or specs.SchedulePolicy()
    engine = cat.engine(body.algorithm.engine)
    dataset_versions.pin(conn, body.algorithm.inputs, project_id)
    check_paths(body.algorithm, body.spec, places=places, project_id=project_id,
                policy=policy)
    tensorboards.check(body)
    reg = models.registration(body, places.model_channel if places else "train_url")
    search = search_spec.checked_policy(body.algorithm)
    model_location = resolve_model(conn, body, project_id) if body.model else None
    if body.baseline_model is not None:
        body.baseline_model.location = resolve_model(conn, body, project_id,
                                                     body.baseline_model)
    job_id = job_repo.new_job_id()
    normalized = normalize(body, flavor, engine, job_id=job_id, places=places,
                           model_location=model_location)
    staging = needs_staging(normalized, model_location) or bool(version and version.resume)
    staged = search_spec.JOB_STAGING if search is not None else (
        STAGING_PENDING if staging else None)
    demand = flavor.resources
    job_repo.insert_job(conn, {
        "id": job_id, "project_id": project_id, "name": body.metadata.name,
        "description": body.metadata.description, "kind": body.kind,
        "user_name": user_name, "phase": jobs.Phase.CREATING.value,
        "secondary_phase": jobs.SecondaryPhase.CREATING.value,
        "spec": normalized.model_dump_json(exclude_none=True),
        "flavor_id": flavor.flavor_id, "node_count": node_count, "cpu": demand.cpu,
        "memory_mb": demand.memory_mb, "gpu": demand.gpu,
        "accelerators": resources.accels_json(demand.accel),
        "retry_limit": body.metadata.retry_limit, "create_time": now, "updated_at": now,
        "pool_id": pool, "priority": sched.priority or 1,
        "preemptible": bool(sched.preemptible), "spread": sched.strategy == "spread",
        "gpu_type": gpu_type, "node_name": body.spec.resource.node_name or "",
        "family_id": version.family_id if version else job_id,
        "version": version.number if version else 1,
        "staging": staged,
        **(dict(zip(("owner_kind", "owner_id", "owner_role"), owner, strict=True))
           if owner else {}),
    }, check_name=version is None)
    _record_version(conn, job_id, body, project_id, version, now)
    image = body.algorithm.engine.image_url if body.algorithm.engine else None
    job_repo.add_event(conn, job_id, now, f"Job created: flavor {flavor.flavor_id}, "
                   f"{node_count} node(s), " + (f"image {image}" if image else
                                                 f"engine {engine.engine_id}") + (
                       f", from algorithm {made_of.metadata.name}" if made_of else ""))
    if search is not None:  # its trials register the model it saves, not it
        search_repo.insert(conn, job_id=job_id, project_id=project_id, policy=search,
                           model=(reg.model, reg.channel) if reg else None, now=now)
    return job_id


def check_fits(cat: catalog_mod.Catalog, pool: str, node_name: str | None,
               flavor: resources.Flavor, node_count: int) -> None:
    """NeverFits unless `node_count` tasks of `flavor` fit on the nodes of `pool` it may
    use (the one `node_name` pins it to; with the GPU product it asks for)."""
    gpu_type = flavor.gpu_product if flavor.gpu else ""
    nodes = [n for n in pinned(cat, pool, node_name)
             if not gpu_type or any(g.name == gpu_type for g in n.gpus)]
    if not nodes and cat.pool_nodes(pool):
        raise errors.NeverFits(f"no node of pool '{pool}' has {gpu_type} GPUs")
    resources.check_fits_somewhere(flavor.resources, node_count, nodes, where=f"pool '{pool}'")


def _record_version(conn: sa.Connection, job_id: str, body: specs.JobCreate,
                    project_id: str, version: NewVersion | None, now: int) -> None:
    """A new job starts a family of versions; a new version joins its family."""
    if version is None:
        version_repo.start_family(conn, job_id=job_id, project_id=project_id,
                                   name=body.metadata.name, now=now,
                                   output_bases={o.name: o.url for o in body.algorithm.outputs})
    else:
        version_repo.add_version(conn, job_id=job_id, family_id=version.family_id,
                                  number=version.number, parent=version.parent,
                                  resume=version.resume, output_bases=version.output_bases,
                                  now=now)


def from_algorithm(conn: sa.Connection, body: specs.JobCreate, project_id: str, *,
                   strict: bool = True) -> tuple[specs.JobCreate, algorithms.AlgorithmBody | None]:
    """The job made of the project's algorithm its `algorithm.id` names, and that
    algorithm; the body as it is when it names none. A job an object owns (a search's
    trial) may come already made of one (`strict` False): its code is then its own."""
    alg = body.algorithm
    if not alg.id or (not strict and (alg.code_dir or alg.command)):
        return body, None
    try:
        row = algorithm_repo.get(conn, project_id, alg.id)
    except errors.NotFound:  # a reference in the body: the body is wrong
        raise errors.BadParameter(f"algorithm.id: algorithm '{alg.id}' does not exist in "
                                  "this project") from None
    saved = algorithms.AlgorithmBody.model_validate_json(row.body)
    merged = algorithms.apply(row.id, saved, alg)
    return body.model_copy(update={"algorithm": merged}), saved


def check_paths(algorithm: specs.Algorithm, spec: specs.Spec, *,
                places: Places | None = None, project_id: str = "",
                policy: paths.Policy | None = None) -> None:
    """Every path of the job exists where it must and, with a `policy`, every local one is
    one the project may use; object-storage URLs must name a store the project has."""
    def remote(url: str | None, what: str) -> bool:
        if not objects.is_remote(url):
            return False
        assert url is not None
        _store_of(url, what, places, project_id)
        return True

    def local(url: str, what: str) -> pathlib.Path:
        path = runs.local_path(url, what)
        if policy is not None:
            paths.confine(policy, path, what)
        return path

    if algorithm.code_dir and not remote(algorithm.code_dir, "algorithm.code_dir"):
        code = local(algorithm.code_dir, "algorithm.code_dir")
        if not code.is_dir():
            raise errors.BadParameter(f"algorithm.code_dir '{code}' is not a directory")
        assert algorithm.boot_file is not None
        boot = runs.resolve_boot_file(code, algorithm.boot_file)
        if not boot.is_file():
            raise errors.BadParameter(f"algorithm.boot_file '{boot}' does not exist")
    elif algorithm.code_dir:
        _remote_boot_file(algorithm.code_dir, algorithm.boot_file or "")
    if algorithm.working_dir and (not algorithm.code_dir
                                  or os.path.isabs(algorithm.working_dir)):
        local(algorithm.working_dir, "algorithm.working_dir")
    for ch in algorithm.inputs:
        # A dataset version's folder is the server's, not a path the project names.
        if remote(ch.url, f"input '{ch.name}'") or ch.dataset is not None:
            continue
        path = local(ch.url, f"input '{ch.name}'")
        if not path.exists():
            raise errors.BadParameter(f"input '{ch.name}': '{path}' does not exist")
    for out in algorithm.outputs:
        check_output(out.url, f"output '{out.name}'", places=places, project_id=project_id,
                     policy=policy)
    for each in algorithm.outputs:
        _period(each)
    algorithm.summary_dir()  # refused unless it is in an output channel
    if spec.log_export_path:
        for field in ("obs_url", "host_path"):
            url = getattr(spec.log_export_path, field)
            if url and not remote(url, f"spec.log_export_path.{field}"):
                local(url, f"spec.log_export_path.{field}")


def check_output(url: str, what: str, *, places: Places | None = None, project_id: str = "",
                 policy: paths.Policy | None = None) -> None:
    """Where a job may write: an object-storage URL of a store the project has, or a local
    folder (or none yet) that, with a `policy`, the project may use."""
    if objects.is_remote(url):
        _store_of(url, what, places, project_id)
        return
    path = runs.local_path(url, what)
    if policy is not None:
        paths.confine(policy, path, what)
    if path.exists() and not path.is_dir():
        raise errors.BadParameter(f"{what}: '{path}' is not a directory")


def _store_of(url: str, what: str, places: Places | None, project_id: str) -> None:
    if places is None or places.stores is None:
        raise errors.BadParameter(f"{what} '{url}': object storage is not available here")
    places.stores.require(url, what, project_id)


PERIOD_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600}


def period_seconds(out: specs.Output) -> float:
    """Seconds between uploads of an object-storage output channel (`period`: 30, "30s",
    "5m"; 30 by default)."""
    raw = (out.period or "30").strip().lower()
    unit = raw[-1] if raw and raw[-1] in PERIOD_UNITS else ""
    try:
        seconds = float(raw[:-1] if unit else raw) * PERIOD_UNITS[unit]
    except ValueError:
        raise errors.BadParameter(
            f"output '{out.name}': period '{out.period}' is not a duration (30, 30s, 5m)"
        ) from None
    if not 1 <= seconds <= 86400:
        raise errors.BadParameter(f"output '{out.name}': period must be 1 s to 24 h")
    return seconds


def _period(out: specs.Output) -> float:
    if out.mode not in (None, "upload_periodically", "upload_at_end"):
        raise errors.BadParameter(f"output '{out.name}': mode must be upload_periodically "
                                  "or upload_at_end")
    return period_seconds(out)


def _remote_boot_file(code_dir: str, boot_file: str) -> str:
    """The boot file relative to a remote code_dir (it may be given by its full URL)."""
    base = code_dir.rstrip("/") + "/"
    if objects.is_remote(boot_file):
        if not boot_file.startswith(base):
            raise errors.BadParameter(
                f"algorithm.boot_file '{boot_file}' is not inside code_dir '{code_dir}'")
        boot_file = boot_file[len(base):]
    if not boot_file or boot_file.startswith("/") or ".." in boot_file.split("/"):
        raise errors.BadParameter(
            f"algorithm.boot_file '{boot_file}' must be a path inside code_dir '{code_dir}'")
    return boot_file


def pinned(cat: catalog_mod.Catalog, pool: str, node: str | None) -> list[resources.Node]:
    """The nodes of `pool` a job may run on: all, or the one it is pinned to (BadParameter
    when the pool has no node of that name)."""
    nodes = cat.pool_nodes(pool)
    if not node:
        return nodes
    found = [n for n in nodes if n.name == node]
    if not found:
        names = ", ".join(n.name for n in nodes) or "none now"
        raise errors.BadParameter(f"spec.resource.node_name: pool '{pool}' has no node "
                                  f"'{node}' (its nodes: {names})")
    return found


def resolve_model(conn: sa.Connection, body: specs.JobCreate, project_id: str,
                  ref: specs.ModelRef | None = None) -> str:
    """Pin the job's model reference (or `ref`, another of its references) to a version;
    returns where its files are."""
    ref = ref or body.model
    assert ref is not None
    what = "model" if ref is body.model else "baseline_model"
    if ref.location is not None and ref.version and ref.alias:
        raise errors.BadParameter(f"{what}: give a version or an alias, not both")
    try:
        model = model_repo.get(conn, project_id, ref.name)
        row = model_repo.resolve(conn, model, ref.version, ref.alias)
    except errors.NotFound as exc:  # a reference in the body: the body is wrong
        raise errors.BadParameter(f"{what}: {exc.message}") from None
    ref.version = int(row.version)
    return str(row.location)


def normalize(body: specs.JobCreate, flavor: resources.Flavor, engine: settings.EngineConfig, *,
              job_id: str = "", places: Places | None = None,
              model_location: str | None = None) -> specs.JobCreate:
    """The spec as it will run: defaults filled, channels' local_dir set."""
    data = body.model_copy(deep=True)
    data.spec.resource.flavor_id = flavor.flavor_id
    data.spec.resource.flavor_name = flavor.flavor_name
    asked = body.algorithm.engine
    data.algorithm.engine = (
        specs.Engine(image_url=asked.image_url) if asked and asked.image_url else
        specs.Engine(engine_id=engine.engine_id, engine_name=engine.engine_name,
                     engine_version=engine.engine_version,
                     requirements=asked.requirements if asked else None))
    alg = data.algorithm
    staged = places.job_dir(job_id) if places else pathlib.Path("/nonexistent")
    alg.local_code_dir = None  # corral's own: where a remote code_dir is fetched to
    if objects.is_remote(alg.code_dir):
        assert alg.code_dir is not None
        alg.boot_file = _remote_boot_file(alg.code_dir, alg.boot_file or "")
        alg.local_code_dir = str(staged / "code-src")
    for ch in alg.inputs:
        ch.local_dir = (str(staged / "inputs" / ch.name) if is_staged(ch)
                        else str(runs.local_path(ch.url, ch.name)))
    for out in alg.outputs:
        out.local_dir = (str(staged / "outputs" / out.name) if objects.is_remote(out.url)
                         else str(runs.local_path(out.url, out.name)))
        out.mode = out.mode or "upload_periodically"
        out.period = out.period or "30"
    if model_location is not None:
        local = (str(staged / "model") if objects.is_remote(model_location)
                 else model_location)
        alg.parameters = [p for p in alg.parameters if p.name != "model_url"]
        assert data.model is not None
        data.model.location = model_location
        alg.parameters.append(specs.Parameter(
            name="model_url", value=local,
            description=f"{specs.MODEL_PARAMETER_NOTE} {data.model.name} "
                        f"version {data.model.version}"))
    return data


def is_staged(ch: specs.Input) -> bool:
    """Whether the job reads a copy of the input that corral fetches into its run folder
    before it is queued (object storage, a dataset version), not the path it names."""
    return objects.is_remote(ch.url) or ch.dataset is not None


def needs_staging(spec: specs.JobCreate, model_location: str | None) -> bool:
    alg = spec.algorithm
    return (objects.is_remote(alg.code_dir) or objects.is_remote(model_location)
            or any(is_staged(ch) for ch in alg.inputs)
            or bool(alg.engine and alg.engine.requirements))


def check_requirements(cat: catalog_mod.Catalog, body: specs.JobCreate, pool: str) -> None:
    """Environments are built on the server's machine: a job that asks for packages runs
    on a pool of this machine (docs/environments.md#ray-pools)."""
    engine = body.algorithm.engine
    if engine and engine.requirements and cat.executor_of(pool)["executor"] != settings.LOCAL:
        raise errors.BadParameter(
            f"algorithm.engine.requirements is not supported on pool '{pool}', which runs "
            "on a Ray cluster: environments are built on the server's machine only; install "
            "the packages in an engine of the cluster's nodes ([[engines]]) or run the job "
            "on a pool of this machine")


def check_image(cat: catalog_mod.Catalog, engine: specs.Engine | None, *,
                pool: str | None = None, flavor: resources.Flavor | None = None) -> None:
    """A job that gives `engine.image_url` runs in that image where the server is set up for
    it; elsewhere it is refused, saying what is missing (docs/environments.md#images)."""
    if engine is None or not engine.image_url:
        return
    runtime = cat.container_runtime
    if runtime is None:
        raise errors.BadParameter(
            "engine.image_url needs container_runtime = 'podman' in the server's settings "
            "(docs/environments.md#images)")
    if shutil.which(runtime) is None:
        raise errors.BadParameter(
            f"engine.image_url: {runtime} is not installed on this machine (the server's "
            f"settings say container_runtime = '{runtime}', but no folder of its PATH has it)")
    if pool is not None and cat.executor_of(pool)["executor"] != settings.LOCAL:
        raise errors.BadParameter(
            f"engine.image_url is not supported on pool '{pool}', which runs on a Ray "
            "cluster: jobs run in an image on the server's machine only; run the job on a "
            "pool of this machine")
    if flavor is not None and flavor.accelerators:
        names = ", ".join(a.name for a in flavor.accelerators)
        raise errors.BadParameter(
            f"engine.image_url: flavor '{flavor.flavor_id}' gives {names} devices, which "
            "corral does not pass into a container (GPUs only); choose a flavor without them")
