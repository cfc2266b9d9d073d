"""corral's one settings object: `CORRAL_*` environment variables over a TOML file.

Built once in `main()` (server, CLI) and passed down; nothing else reads the environment.
The TOML file is `$CORRAL_HOME/config.toml` unless `CORRAL_CONFIG` names another.
"""

from __future__ import annotations

import os
import pathlib
import sys
from typing import Any

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict


class EngineConfig(BaseModel):
    """A named Python interpreter (or a virtualenv's) that runs boot files."""

    engine_id: str
    engine_name: str = "Python"
    engine_version: str = ""
    #: the interpreter, or a virtualenv directory (its bin/python is used)
    python: str

    @field_validator("python")
    @classmethod
    def _venv(cls, v: str) -> str:
        p = pathlib.Path(v).expanduser()
        return str(p / "bin" / "python") if p.is_dir() else str(p)


class FlavorConfig(BaseModel):
    flavor_id: str
    flavor_name: str = ""
    cpu: float = Field(gt=0)
    memory_gb: int = Field(ge=1)
    gpu: int = Field(default=0, ge=0)
    max_num: int = Field(default=1, ge=1)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CORRAL_", extra="ignore")

    home: pathlib.Path = Field(default_factory=lambda: pathlib.Path.home() / ".corral")
    config: pathlib.Path | None = None
    database_url: str | None = None
    host: str = "127.0.0.1"
    port: int = 8765
    url: str = "http://127.0.0.1:8765"
    #: seconds between SIGTERM and SIGKILL when a job is stopped
    grace_period: float = 10.0
    #: seconds between reconciler passes when nothing wakes it earlier
    tick_interval: float = 1.0
    #: seconds between resource samples of running tasks
    metrics_interval: float = 5.0
    #: the log preview returns at most this many bytes from the end of a log
    log_preview_bytes: int = 5 * 1024 * 1024
    #: flavors replace the detected defaults when given
    flavors: list[FlavorConfig] = Field(default_factory=list)
    #: engines in addition to the default one (the server's own Python)
    engines: list[EngineConfig] = Field(default_factory=list)
    default_flavor: str = "corral.cpu.1u"
    #: override detected capacity (useful to share a machine with other work)
    cpus: int | None = None
    memory_gb: int | None = None
    #: run jobs on this Ray cluster instead of this machine ("auto", "HOST:PORT" or
    #: "ray://HOST:PORT"); needs the ray extra
    ray_address: str | None = None
    #: the Ray namespace corral's actors and placement groups are named in
    ray_namespace: str = "corral"

    @field_validator("home", mode="after")
    @classmethod
    def _abs_home(cls, v: pathlib.Path) -> pathlib.Path:
        return v.expanduser().resolve()

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _TomlSource(settings_cls))

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{self.home / 'corral.db'}"

    @property
    def runs_dir(self) -> pathlib.Path:
        return self.home / "runs"

    def default_engine(self) -> EngineConfig:
        v = sys.version_info
        return EngineConfig(engine_id=f"python-{v.major}.{v.minor}", engine_name="Python",
                            engine_version=f"{v.major}.{v.minor}.{v.micro}",
                            python=sys.executable)

    def all_engines(self) -> list[EngineConfig]:
        return [self.default_engine(), *self.engines]


class _TomlSource(PydanticBaseSettingsSource):
    """Reads the TOML file named by CORRAL_CONFIG, or config.toml in CORRAL_HOME."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = os.environ.get("CORRAL_CONFIG")
        if not path:
            home = os.environ.get("CORRAL_HOME") or str(pathlib.Path.home() / ".corral")
            path = str(pathlib.Path(home).expanduser() / "config.toml")
        p = pathlib.Path(path)
        if not p.is_file():
            return {}
        import tomllib

        with p.open("rb") as fh:
            return tomllib.load(fh)


def load(**overrides: Any) -> Settings:
    return Settings(**{k: v for k, v in overrides.items() if v is not None})
