"""The one error hierarchy of corral.

Every layer raises these; only the API turns them into HTTP answers, in one handler, with
the ModelArts error body and the HTTP status its table (`api/error_bodies.STATUS`) gives
the class. A subclass's docstring is its default message; its `error_code` is ModelArts'.
"""

from __future__ import annotations


class CorralError(Exception):
    """Internal error."""

    error_code = "ModelArts.0500"

    def __init__(self, message: str | None = None) -> None:
        self.message = message or (self.__doc__ or "").strip()
        super().__init__(self.message)


class BadParameter(CorralError):
    """Invalid parameter."""

    error_code = "ModelArts.2788"


class BadJSON(CorralError):
    """The request body is not valid JSON."""

    error_code = "ModelArts.2787"


class NotFound(CorralError):
    """The training job does not exist."""

    error_code = "ModelArts.2775"


class ProjectNotFound(CorralError):
    """The project does not exist."""

    error_code = "ModelArts.2786"


class DuplicateName(CorralError):
    """A training job with this name already exists."""

    error_code = "ModelArts.2751"


class BadFlavor(CorralError):
    """The resource flavor does not exist."""

    error_code = "ModelArts.2763"


class NeverFits(BadFlavor):
    """The job asks for more resources than this cluster has; it could never start."""


class BadEngine(BadParameter):
    """The engine does not exist."""


class InvalidState(CorralError):
    """The training job is not in a state that allows this operation."""

    error_code = "ModelArts.2796"


class LaunchError(CorralError):
    """A task could not be started."""

    error_code = "ModelArts.2800"


class BadCredential(CorralError):
    """The request carries no valid credential."""

    error_code = "ModelArts.2784"


class Forbidden(CorralError):
    """The caller's role does not allow this operation."""

    error_code = "ModelArts.0403"
