"""Prebuilt statements run straight on the database driver, for those every job runs.

SQLAlchemy compiles a Core statement once and caches the SQL, but every execution still
builds an execution context, processes parameters, describes the result and wraps each
row: on this project's benchmark machine about 15-35 us a statement against 2-10 us for
SQLite to run it, and five to ten times that in the first milliseconds after the calling
thread was idle (a pass woken by a task's end runs cold). A job goes through some thirty
statements between its submission and the answer that it has ended.

`Prepared` wraps such a statement: it is compiled by SQLAlchemy for the connection's
dialect (once per set of parameter names), and its SQL runs on the driver's cursor inside
the caller's transaction, which SQLAlchemy keeps managing. The SQL is the same, so is the
transaction; errors come out as SQLAlchemy's exceptions. What it cannot run exactly as
SQLAlchemy would (expanding parameters, Python-side defaults other than constants) it
refuses when the statement is first run, so a statement that works in the tests works
everywhere; values are converted on the way in and out as SQLAlchemy's types say (booleans
on SQLite).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa

#: a statement's parameters, as given to SQLAlchemy's Connection.execute
Params = Mapping[str, Any]


class Row(tuple[Any, ...]):
    """A result row: a tuple whose columns are also attributes (the row classes made for
    each statement derive from namedtuple classes), with `_mapping` like SQLAlchemy's."""

    __slots__ = ()
    _fields: tuple[str, ...]

    @property
    def _mapping(self) -> dict[str, Any]:
        return dict(zip(self._fields, self, strict=True))


@dataclasses.dataclass
class _Plan:
    """A statement compiled for one dialect and set of parameter names."""

    sql: str
    #: parameter names in the order the SQL takes them; None where the driver takes a dict
    order: tuple[str, ...] | None
    #: values of the parameters the statement holds itself (literals), and the constant
    #: defaults of the columns an INSERT leaves out
    fixed: dict[str, Any]
    #: converters of the parameters whose type has one
    procs: tuple[tuple[str, Callable[[Any], Any]], ...] = ()
    #: the result's row class and the converters of its columns, made at the first result
    row: type[Row] | None = None
    convert: tuple[tuple[int, Callable[[Any], Any]], ...] = ()

    def args(self, params: Params) -> Any:
        merged = {**self.fixed, **params} if self.fixed or self.procs else params
        for name, fn in self.procs:
            if merged.get(name) is not None:
                merged[name] = fn(merged[name])  # type: ignore[index]
        if self.order is None:
            return merged
        return tuple([merged[name] for name in self.order])


class Prepared:
    """A Core statement (built once, with bind parameters) run on the driver's cursor."""

    __slots__ = ("_plans", "stmt", "varies")

    def __init__(self, stmt: Any) -> None:
        self.stmt = stmt
        #: an INSERT or UPDATE: its columns come from the parameters given, as with
        #: Connection.execute (one plan per set of names)
        self.varies = isinstance(stmt, sa.Insert | sa.Update)
        self._plans: dict[tuple[Any, ...], _Plan] = {}

    # --- running it ---------------------------------------------------------------------

    def rows(self, conn: sa.Connection, params: Params | None = None) -> list[Any]:
        plan, cur = self._run(conn, params or {})
        got = cur.fetchall()
        return self._wrap(plan, cur, got, conn.dialect)

    def first(self, conn: sa.Connection, params: Params | None = None) -> Any:
        plan, cur = self._run(conn, params or {})
        got = cur.fetchone()
        row = None if got is None else self._wrap(plan, cur, [got], conn.dialect)[0]
        cur.close()  # the rest of the result is not read: the statement ends here
        return row

    def scalar(self, conn: sa.Connection, params: Params | None = None) -> Any:
        """The first column of the first row (None without one)."""
        row = self.first(conn, params)
        return None if row is None else row[0]

    def run(self, conn: sa.Connection, params: Params | None = None) -> int:
        """Run it for its effect; the number of rows it matched."""
        _plan, cur = self._run(conn, params or {})
        return int(cur.rowcount)

    def run_many(self, conn: sa.Connection, many: Sequence[Params]) -> None:
        """Run it once for each set of parameters (all with the same names), in one call."""
        if not many:
            return
        plan = self._plan(conn.dialect, many[0])
        self._call(conn, plan, [plan.args(p) for p in many], many=True)

    # --- inside -------------------------------------------------------------------------

    def _run(self, conn: sa.Connection, params: Params) -> tuple[_Plan, Any]:
        plan = self._plan(conn.dialect, params)
        return plan, self._call(conn, plan, plan.args(params))

    @staticmethod
    def _call(conn: sa.Connection, plan: _Plan, args: Any, *, many: bool = False) -> Any:
        """A cursor that ran the plan's SQL with `args` (each of them, with `many`)."""
        dbapi_conn = conn.connection.driver_connection
        assert dbapi_conn is not None
        cur = dbapi_conn.cursor()
        dialect = conn.dialect
        try:
            if many:
                cur.executemany(plan.sql, args)
            else:
                cur.execute(plan.sql, args)
        except dialect.loaded_dbapi.Error as exc:
            if dialect.is_disconnect(exc, dbapi_conn, cur):
                conn.invalidate(exc)
            raise sa.exc.DBAPIError.instance(
                plan.sql, None, exc, dialect.loaded_dbapi.Error, dialect=dialect) from exc
        return cur

    def _plan(self, dialect: sa.Dialect, params: Params) -> _Plan:
        names = tuple(sorted(params)) if self.varies else ()
        key = (type(dialect), dialect.paramstyle, dialect.server_version_info, names)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._compile(dialect, names)
        return plan

    def _compile(self, dialect: sa.Dialect, names: tuple[str, ...]) -> _Plan:
        c: Any = self.stmt.compile(dialect=dialect, column_keys=list(names) or None)
        if c.positiontup is None and dialect.paramstyle not in ("named", "pyformat"):
            raise TypeError(f"{dialect.paramstyle} parameters are not supported")
        fixed: dict[str, Any] = {}
        procs = []
        for name, bind in c.binds.items():
            if bind.expanding:
                raise TypeError(f"expanding parameter {name}: run it through SQLAlchemy")
            proc = bind.type.dialect_impl(dialect).bind_processor(dialect)
            if proc is not None:
                procs.append((name, proc))
            if bind.callable is not None:
                raise TypeError(f"parameter {name} is computed: run it through SQLAlchemy")
            if bind.value is not None or (not bind.required and name not in names):
                fixed[name] = bind.value
        for col in getattr(c, "insert_prefetch", ()) or ():
            default = col.default
            if default is None or not default.is_scalar:
                raise TypeError(f"column {col.name} has a computed default")
            if col.key not in names:
                fixed[col.key] = default.arg
        if getattr(c, "update_prefetch", None):
            raise TypeError("columns with update defaults: run it through SQLAlchemy")
        # Parameters given at the call win over INSERT defaults (literals are named by
        # SQLAlchemy itself: no parameter given shares a name with one).
        order = tuple(c.positiontup) if c.positiontup is not None else None
        return _Plan(sql=c.string, order=order, fixed=fixed, procs=tuple(procs))

    def _wrap(self, plan: _Plan, cur: Any, got: list[Any], dialect: sa.Dialect) -> list[Any]:
        if plan.row is None:
            self._describe(plan, cur, dialect)
        make = plan.row._make  # type: ignore[union-attr]
        if not plan.convert:
            return [make(r) for r in got]
        out = []
        for r in got:
            values = list(r)
            for i, fn in plan.convert:
                if values[i] is not None:
                    values[i] = fn(values[i])
            out.append(make(values))
        return out

    def _describe(self, plan: _Plan, cur: Any, dialect: sa.Dialect) -> None:
        """The row class and converters of the statement's result, from the driver's
        description of it and the types of the statement's columns (whichever thread
        comes first; `row` is set last, once `convert` is there to go with it)."""
        described = cur.description
        columns = list(getattr(self.stmt, "selected_columns", ()))
        if len(columns) != len(described):
            raise TypeError("a result whose columns are not the statement's: run it "
                            "through SQLAlchemy")
        convert = []
        for i, col in enumerate(columns):
            coltype = described[i][1]  # the driver's type code (PostgreSQL's OID)
            fn = col.type.dialect_impl(dialect).result_processor(dialect, coltype)
            if fn is not None:
                convert.append((i, fn))
        base = collections.namedtuple("_Row", [d[0] for d in described])  # type: ignore[misc]
        plan.convert = tuple(convert)
        plan.row = type("Row", (base, Row), {"__slots__": ()})
