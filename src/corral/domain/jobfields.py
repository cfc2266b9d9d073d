"""ModelArts job fields that corral maps onto its own, or refuses in words.

A field of the create body is honoured or refused at submit, never accepted and ignored:

- `spec.auto_stop` (`{time_unit: HOURS, duration: N}`) is a run time limit: the job's
  `max_run_time` (the earlier of the two when both are given);
- `algorithm.summary` names where the job writes its visualization logs: a folder in one
  of its output channels, given to the job as `CORRAL_SUMMARY_DIR`;
- `spec.volumes` (NFS, obsfs and OBS mounts into a container) are refused: corral runs no
  containers and mounts nothing; the data is given as an input or output channel;
- `tensorboard/enable: true` asks for TensorBoard over the job's summary folder, which
  corral serves (services/tensorboards.py): it needs an `algorithm.summary` of log_type
  tensorboard (`check_tensorboard`);
- the other annotations that start a training application next to the job (`jupyter-lab/
  enable`, `mindstudio-insight/enable`) are refused when true: corral starts neither (a
  notebook is corral's JupyterLab).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

#: the variable naming the folder a job's `algorithm.summary` says it writes to
SUMMARY_ENV = "CORRAL_SUMMARY_DIR"
#: hours; what max_run_time allows (a year)
MAX_AUTO_STOP_HOURS = 365 * 24
#: the annotation that asks for TensorBoard over the job's summary folder
TENSORBOARD = "tensorboard/enable"
#: annotations that ask ModelArts to run an application beside the job, and what to use
APPLICATIONS = {
    "jupyter-lab/enable": "corral starts no JupyterLab inside a training job: create a "
    "notebook (POST /v1/{project_id}/notebooks, `corral notebooks create`)",
    "mindstudio-insight/enable": "corral starts no MindStudio Insight for a job",
}
#: the volume types of the reference, and what to give instead
VOLUMES = {
    "nfs": "mount the NFS export on the nodes and name its folder (a storage root of the "
    "project) as an input or output channel",
    "pfs": "give the obsfs path as an input or output channel (s3:// through a configured "
    "object store)",
    "obs": "give the OBS path as an input or output channel (s3:// through a configured "
    "object store)",
}


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class AutoStop(_Model):
    """`spec.auto_stop`: stop the job after `duration` hours of running."""

    time_unit: Literal["HOURS"] = Field(description="HOURS, the only unit of the reference")
    duration: int = Field(ge=1, le=MAX_AUTO_STOP_HOURS, description="hours from the job's "
                          "start; past them it is stopped, as past max_run_time")

    @property
    def seconds(self) -> int:
        return self.duration * 3600


class PfsPath(_Model):
    pfs_path: str = Field(min_length=1, max_length=4096)


class LogDir(_Model):
    pfs: PfsPath


class Summary(_Model):
    """`algorithm.summary`: where the job writes visualization logs (TensorBoard's)."""

    log_type: Literal["tensorboard", "mindstudio-insight"] | None = None
    log_dir: LogDir | None = None
    #: the jobs a visualization job reads: refused (corral has no visualization jobs)
    data_sources: list[dict[str, Any]] | None = None

    def check(self) -> None:
        """ValueError unless corral can honour it."""
        if self.data_sources:
            raise ValueError("algorithm.summary.data_sources: corral has no visualization "
                             "jobs; read another job's summaries from its output folder")
        if self.log_type and self.log_dir is None:
            raise ValueError("algorithm.summary.log_dir is needed with log_type")
        if self.log_dir is not None and not self.log_type:
            raise ValueError("algorithm.summary.log_type (tensorboard or mindstudio-insight) "
                             "is needed with log_dir")


def summary_dir(summary: Summary | None, outputs: list[tuple[str, str, str]]) -> str | None:
    """The folder the job writes its summaries to, as the job sees it: `log_dir` inside
    (or being) one of `outputs` (name, URL, the folder the job writes it through); None
    without a summary; ValueError when the folder is in no output channel."""
    if summary is None or summary.log_dir is None:
        return None
    want = summary.log_dir.pfs.pfs_path.rstrip("/") or "/"
    for _name, url, folder in outputs:
        base = url.rstrip("/") or "/"
        if want == base:
            return folder
        if want.startswith(base + "/"):
            rest = want[len(base) + 1:]
            if ".." in rest.split("/"):
                break
            return folder.rstrip("/") + "/" + rest
    named = ", ".join(f"{n} ({u})" for n, u, _f in outputs) or "none"
    raise ValueError(f"algorithm.summary.log_dir.pfs.pfs_path '{summary.log_dir.pfs.pfs_path}' "
                     f"is in none of the job's output channels ({named}): summaries are "
                     "written through an output channel, as the job's other files are")


def check_volumes(volumes: list[dict[str, Any]] | None) -> None:
    """ValueError for any volume: corral mounts nothing, and says what to use instead."""
    for i, volume in enumerate(volumes or []):
        kinds = [k for k in volume if volume[k] is not None] if isinstance(volume, dict) else []
        kind = next((k for k in kinds if k in VOLUMES), None)
        instead = VOLUMES.get(kind or "", "give the data as an input or output channel")
        raise ValueError(f"spec.volumes[{i}]{'.' + kind if kind else ''}: corral mounts "
                         f"no volumes; {instead}")


def check_applications(annotations: dict[str, str]) -> None:
    """ValueError for an application annotation that is true (false asks for nothing),
    but `tensorboard/enable`, or one that is neither."""
    for key in (TENSORBOARD, *APPLICATIONS):
        value = annotations.get(key)
        if value is None:
            continue
        flag = str(value).strip().lower()
        if flag not in ("true", "false"):
            raise ValueError(f"{key} must be true or false")
        if flag == "true" and key in APPLICATIONS:
            raise ValueError(f"{key}: {APPLICATIONS[key]}")


def wants_tensorboard(annotations: dict[str, str]) -> bool:
    """Whether the annotations ask for TensorBoard over the job's summary folder."""
    return str(annotations.get(TENSORBOARD, "")).strip().lower() == "true"


def check_tensorboard(summary: Summary | None) -> None:
    """ValueError unless `summary` gives TensorBoard something to show: a log_dir (in an
    output channel, as `summary_dir` checks) of log_type tensorboard."""
    if summary is None or summary.log_dir is None:
        raise ValueError(f"{TENSORBOARD}: TensorBoard shows the job's summary folder, and "
                         "the job names none: give algorithm.summary {log_type: tensorboard, "
                         "log_dir: {pfs: {pfs_path: <an output channel's URL, or a folder "
                         "in one>}}} and write the summaries to CORRAL_SUMMARY_DIR")
    if summary.log_type != "tensorboard":
        raise ValueError(f"{TENSORBOARD}: algorithm.summary.log_type is {summary.log_type}; "
                         "corral serves TensorBoard only, over summaries of log_type "
                         "tensorboard (it has no MindStudio Insight)")
