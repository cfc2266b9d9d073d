"""The store's row classes keep up with the tables they are read from.

A migration that adds a column to a table must add the field to its row class too (rows
are built with `cls(**row._mapping)`, so a column without a field fails at run time).
"""

from __future__ import annotations

import dataclasses

import pytest
import sqlalchemy as sa

from corral.store import kind_rows, kind_tables, rows, schema

#: row classes read with `select(table)`, and the table
WHOLE_TABLES: dict[type, sa.Table] = {
    rows.Job: schema.jobs,
    rows.Task: schema.tasks,
    rows.Attempt: schema.attempts,
    rows.Event: schema.job_events,
    rows.Quota: schema.quotas,
    rows.Usage: schema.project_usage,
    rows.TaskMetric: schema.task_metrics,
    rows.Project: schema.projects,
    rows.User: schema.users,
    rows.AccessKey: schema.access_keys,
    rows.Version: schema.job_versions,
    rows.MetricPoint: schema.training_metrics,
    rows.Model: schema.models,
    rows.ModelVersion: schema.model_versions,
    kind_rows.KindEvent: kind_tables.kind_events,
    kind_rows.Dataset: kind_tables.datasets,
    kind_rows.Loop: kind_tables.il_loops,
    kind_rows.Round: kind_tables.il_rounds,
    kind_rows.Deploy: kind_tables.il_deploys,
    rows.AliasMove: schema.model_alias_history,
    kind_rows.Pipeline: kind_tables.pipelines,
    kind_rows.PipelineAttempt: kind_tables.pipeline_attempts,
    kind_rows.PipelineRun: kind_tables.pipeline_runs,
    kind_rows.Notebook: kind_tables.notebooks,
}
#: row classes read from a whole table and one more column, and that column
WHOLE_TABLES_AND_ONE: dict[type, tuple[type, str]] = {
    rows.LiveTask: (rows.Task, "job_phase"),
    rows.RegisteredVersion: (rows.ModelVersion, "model_name"),
}


def _fields(cls: type) -> dict[str, str]:
    return {f.name: str(f.type) for f in dataclasses.fields(cls)}


@pytest.mark.parametrize("cls", list(WHOLE_TABLES), ids=lambda c: c.__name__)
def test_a_row_class_has_exactly_its_tables_columns(cls: type) -> None:
    table = WHOLE_TABLES[cls]
    fields, columns = set(_fields(cls)), set(table.columns.keys())
    assert fields == columns, (f"{cls.__name__} lacks {sorted(columns - fields)}, has "
                               f"{sorted(fields - columns)} that {table.name} lacks")


@pytest.mark.parametrize("cls", list(WHOLE_TABLES), ids=lambda c: c.__name__)
def test_a_column_that_may_be_null_is_typed_so(cls: type) -> None:
    fields = _fields(cls)
    for column in WHOLE_TABLES[cls].columns:
        if column.name in fields:
            may_be_none = "None" in fields[column.name]
            assert may_be_none == bool(column.nullable), (
                f"{cls.__name__}.{column.name}: {fields[column.name]}, but the column is "
                f"{'' if column.nullable else 'not '}nullable")


@pytest.mark.parametrize("cls", list(WHOLE_TABLES_AND_ONE), ids=lambda c: c.__name__)
def test_a_row_class_of_a_table_and_one_column_has_exactly_those(cls: type) -> None:
    base, extra = WHOLE_TABLES_AND_ONE[cls]
    assert set(_fields(cls)) == set(WHOLE_TABLES[base].columns.keys()) | {extra}


def test_rows_are_built_by_column_name_whatever_the_columns_order() -> None:
    engine = sa.create_engine("sqlite://")
    t = schema.project_usage
    t.create(engine)
    with engine.begin() as conn:
        conn.execute(t.insert(), [{"project_id": "p", "pool_id": "default", "share": 0.5,
                                   "updated_at": 7}])
        in_order = rows.Usage.all(conn.execute(sa.select(t)))
        reversed_ = rows.Usage.all(conn.execute(sa.select(*reversed(list(t.columns)))))
    assert in_order == reversed_ == [rows.Usage(project_id="p", pool_id="default",
                                                share=0.5, updated_at=7)]
