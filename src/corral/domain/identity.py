"""Who is calling and what they may do: roles, and the principal a credential stands for.

A user belongs to projects with a role; a platform admin is an admin in every project
and manages projects and users. An access key is bound to one project: requests signed
with it reach that project only, with the role its user has there.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Mapping
from typing import Annotated

from corral.domain import errors, specs

#: names of users and projects: what fits in a path segment and a shell word
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
NAME_RULE = "1-64 letters, digits, '_', '.' or '-', starting with a letter or digit"
#: a user's or a project's name in a request
Name = Annotated[str, specs.Pattern(f"^{NAME_RE.pattern}$", f"names are {NAME_RULE}")]


class Role(enum.Enum):
    VIEWER = "viewer"  #: reads everything in the project
    MEMBER = "member"  #: also creates jobs and changes or stops its own
    ADMIN = "admin"  #: everything in the project, its credentials and others' jobs included

    @property
    def rank(self) -> int:
        return _RANK[self]

    def allows(self, needed: Role) -> bool:
        return self.rank >= needed.rank


_RANK = {Role.VIEWER: 0, Role.MEMBER: 1, Role.ADMIN: 2}
#: the role a route needs when it declares none: reading is for viewers, the rest members
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def default_role(method: str) -> Role:
    return Role.VIEWER if method.upper() in READ_METHODS else Role.MEMBER


@dataclasses.dataclass(frozen=True)
class Principal:
    """The user behind a verified credential, and their roles by project id."""

    user_id: str
    user_name: str
    is_admin: bool
    roles: Mapping[str, Role]
    #: an access key (or a token made with one) reaches only its own project, else None
    key_project: str | None = None
    #: which credential was used, for audit: "token:<id>" or "key:<access key>"
    credential: str = ""

    def role_in(self, project_id: str) -> Role | None:
        if self.key_project is not None and project_id != self.key_project:
            return None
        if self.is_admin:
            return Role.ADMIN
        return self.roles.get(project_id)

    def require(self, project_id: str, needed: Role) -> Role:
        """The caller's role in the project, or the refusal: a project that is not the
        caller's answers exactly as one that does not exist."""
        role = self.role_in(project_id)
        if role is None:
            raise errors.ProjectNotFound(f"project '{project_id}' does not exist")
        if not role.allows(needed):
            raise errors.Forbidden(
                f"this needs the {needed.value} role in project '{project_id}'; "
                f"you are {role.value}")
        return role

    def require_platform_admin(self) -> None:
        if not self.is_admin:
            raise errors.Forbidden("only a platform admin may do this")

    def may_change_job(self, project_id: str, owner: str, what: str = "job") -> None:
        """Members change their own jobs (and pipelines, loops, notebooks, datasets: `what`
        names it in the refusal); project admins everyone's."""
        role = self.require(project_id, Role.MEMBER)
        if role is not Role.ADMIN and owner != self.user_name:
            raise errors.Forbidden(
                f"this {what} belongs to {owner or 'nobody'}: only its owner or a project "
                "admin may change it")


def check_name(what: str, name: str) -> str:
    if not NAME_RE.fullmatch(name):
        raise errors.BadParameter(f"{what} name '{name}' must be {NAME_RULE}")
    return name


class DuplicateName(errors.DuplicateName):
    """A project or a user with this name already exists."""
