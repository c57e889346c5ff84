"""Which values the history keeps from a run's rows, and the SQL that pulls them out.

A 20,000-row run is ~250 MB of JSON; Python's parser takes tens of seconds for it on this host,
DuckDB's (C++, yyjson) about a second. So the rows are read by DuckDB and the values are pulled
out in SQL; what the SQL reads is declared here, beside the reader in ``compare`` it mirrors,
and ``tests/test_history_store.py`` checks the two agree value for value on real runs:

- compute (``compare.compute_rows``): ``measurements_of(row)``'s forms for each of
  ``compare.cases.CASE_METRICS``, the tree's kernel memory high-water (``tree_memory``), and each
  phase of the implementation's and the evaluator's marks (``compare.phase_costs``);
- browser (``compare.compare_suites``): ``duration_ms``, the resource metrics of profiled runs
  (``resource_forms`` as forms, or the peer's plain numbers with their ``unavailable`` map) and
  the engine's phases (``compare.browser_phases``), with their total as ``phase.total.*``.

A value is kept with its form: ``complete`` and ``partial`` with a number, ``unavailable``
with NULL and the reason (the row's, the peer's ``unavailable`` entry, or what was there
instead of a number). A metric a row does not have at all (an unprofiled run's resource
figures) is not a line. Every attempt is kept with its status; ``counted`` says whether it
enters statistics (an accepted, measured compute attempt; a passing browser attempt), as
compare's ``value_of`` decides.
"""

from __future__ import annotations

from metewand.compare.cases import CASE_METRICS
from metewand.compare.compare_suites import BROWSER_RESOURCE_METRICS

TREE_MEMORY_METRIC = "kernel_tree_memory_high_water_bytes"
COMPUTE_PHASE_FIELDS = {
    "wall_ns": "wall_time_ns",
    "cpu_ns": "cpu_time_ns",
    "memory_peak_bytes": "memory_peak_bytes",
}
BROWSER_PHASE_FIELDS = {"wall_ns": "wall_time_ns", "cpu_ns": "cpu_time_ns"}
TOTAL = "total"  # phase.total.<field>: the engine group's whole attempt (browser)
MAX_ROW_BYTES = 64 << 20

MACROS = (
    """CREATE OR REPLACE TEMP MACRO mw_num(x) AS
        CASE WHEN json_type(x) IN ('BIGINT', 'UBIGINT', 'DOUBLE') THEN TRY_CAST(x AS DOUBLE) END""",
    """CREATE OR REPLACE TEMP MACRO mw_form(x) AS CASE
        WHEN json_type(x) = 'OBJECT' THEN CASE
            WHEN json_extract_string(x, '$.status') IN ('complete', 'partial') AND mw_num(json_extract(x, '$.value')) IS NOT NULL
            THEN json_extract_string(x, '$.status') ELSE 'unavailable' END
        WHEN mw_num(x) IS NOT NULL THEN 'complete'
        ELSE 'unavailable' END""",
    """CREATE OR REPLACE TEMP MACRO mw_value(x) AS
        CASE WHEN mw_form(x) = 'unavailable' THEN NULL
             WHEN json_type(x) = 'OBJECT' THEN mw_num(json_extract(x, '$.value')) ELSE mw_num(x) END""",
    # why a value is unavailable: the form's reason, else what stood there instead of a number
    """CREATE OR REPLACE TEMP MACRO mw_reason(x, fallback) AS
        CASE WHEN mw_form(x) <> 'unavailable' THEN NULL
             ELSE coalesce(json_extract_string(x, '$.reason'), fallback,
                           CASE json_type(x) WHEN 'NULL' THEN 'null'
                                WHEN 'OBJECT' THEN 'form without a number'
                                ELSE 'not a number (' || lower(json_type(x)) || ')' END) END""",
)

COMPUTE_READ = """
SELECT row_number() OVER () AS line, key, status, role, calibration_twin,
       implementation, implementation_parameters,
       json_object('experiment', experiment, 'case', "case", 'dataset', dataset,
                   'dataset_parameters', dataset_parameters, 'problem', problem,
                   'problem_parameters', problem_parameters,
                   'timing_scope', timing_scope)::VARCHAR AS coords,
       coalesce(json_extract(observation, '$.provenance.data.measurements'),
                json_extract(record, '$.outcome.diagnostic.details.measurements'),
                json_extract(record, '$.provenance.data.measurements')) AS measurements,
       coalesce(json_extract(observation, '$.provenance.data.tree_memory'),
                json_extract(record, '$.provenance.data.tree_memory')) AS tree_memory,
       json_extract(phases, '$.implementation.phases[*]') AS impl_phases,
       json_extract(phases, '$.evaluator.phases[*]') AS eval_phases
FROM read_json($path, format = 'newline_delimited', maximum_object_size = $max_bytes,
     columns = {key: 'VARCHAR', status: 'VARCHAR', role: 'VARCHAR', calibration_twin: 'JSON',
                implementation: 'VARCHAR', implementation_parameters: 'JSON',
                experiment: 'JSON', "case": 'JSON', dataset: 'JSON', dataset_parameters: 'JSON',
                problem: 'JSON', problem_parameters: 'JSON', timing_scope: 'JSON',
                observation: 'JSON', record: 'JSON', phases: 'JSON'})
"""

BROWSER_READ = """
SELECT row_number() OVER () AS line,
       coalesce(key, artifact_dir, task_id || '/' || engine || '/' || attempt::VARCHAR) AS key,
       status, calibration_twin, task_id, engine,
       coalesce(driver_path, driver, 'unknown') AS driver,
       duration_ms,
       CASE WHEN json_type(resource_forms) = 'OBJECT' THEN resource_forms ELSE resource END
           AS resource,
       json_extract(resource, '$.unavailable') AS peer_unavailable,
       json_extract(phases, '$.engine.phases[*]') AS engine_phases,
       json_extract(phases, '$.engine.total') AS engine_total
FROM read_json($path, format = 'newline_delimited', maximum_object_size = $max_bytes,
     columns = {key: 'VARCHAR', artifact_dir: 'VARCHAR', attempt: 'JSON', status: 'VARCHAR',
                calibration_twin: 'JSON', task_id: 'VARCHAR', engine: 'VARCHAR',
                driver_path: 'VARCHAR', driver: 'VARCHAR', duration_ms: 'JSON',
                resource: 'JSON', resource_forms: 'JSON', phases: 'JSON'})
"""


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _unpivoted(select_values: str, source: str, fallback: str = "NULL") -> str:
    """Wide JSON columns (one per metric) turned into (metric, form, value, reason) lines;
    UNPIVOT drops a SQL NULL, which is a metric the row does not have."""
    return f"""
    SELECT u.line, u.metric, mw_form(u.x) AS form, mw_value(u.x) AS value,
           mw_reason(u.x, {fallback}) AS reason
    FROM (UNPIVOT (SELECT line, {select_values}{", peer_unavailable" if fallback != "NULL" else ""}
                   FROM {source})
          ON COLUMNS(* EXCLUDE (line{", peer_unavailable" if fallback != "NULL" else ""}))
          INTO NAME metric VALUE x) AS u
    """


def _phase_lines(list_column: str, fields: dict[str, str], role_order: int) -> str:
    """One line per (phase in ``list_column``, field): ``phase.<name>.<field>``."""
    parts = []
    for short, long in fields.items():
        parts.append(
            f"""SELECT line, 'phase.' || (json_extract_string(ph, '$.name')) || '.{short}' AS metric,
                       json_extract(ph, '$.{long}') AS x, {role_order} AS role_order, pos
                FROM (SELECT line, unnest({list_column}) AS ph,
                             unnest(range(1, len({list_column}) + 1)) AS pos
                      FROM mw_rows WHERE {list_column} IS NOT NULL)
                WHERE json_type(ph) = 'OBJECT' AND json_type(json_extract(ph, '$.name')) = 'VARCHAR'
                      AND json_extract(ph, '$.{long}') IS NOT NULL"""
        )
    return " UNION ALL ".join(parts)


def _phases(lists: list[str], fields: dict[str, str]) -> str:
    """Phase values; a name marked twice keeps its first (the reader in compare does the same)."""
    union = " UNION ALL ".join(_phase_lines(col, fields, i) for i, col in enumerate(lists))
    return f"""
    SELECT line, metric, mw_form(x) AS form, mw_value(x) AS value, mw_reason(x, NULL) AS reason
    FROM ({union})
    QUALIFY row_number() OVER (PARTITION BY line, metric ORDER BY role_order, pos) = 1
    """


def compute_values_sql() -> str:
    scalars = ", ".join(
        f"json_extract(measurements, {_literal('$.' + m)}) AS {_quoted(m)}" for m in CASE_METRICS
    )
    scalars += f", json_extract(tree_memory, '$.{TREE_MEMORY_METRIC}') AS {TREE_MEMORY_METRIC}"
    phases = _phases(["impl_phases", "eval_phases"], COMPUTE_PHASE_FIELDS)
    return f"{_unpivoted(scalars, 'mw_rows')} UNION ALL {phases}"


def browser_values_sql() -> str:
    scalars = "duration_ms, " + ", ".join(
        f"json_extract(resource, {_literal('$.' + m)}) AS {_quoted(m)}"
        for m in BROWSER_RESOURCE_METRICS
    )
    totals = ", ".join(
        f"json_extract(engine_total, {_literal('$.' + long)}) AS "
        f"{_quoted(f'phase.{TOTAL}.{short}')}"
        for short, long in BROWSER_PHASE_FIELDS.items()
    )
    # the peer writes null with a reason in its ``unavailable`` map, keyed by a metric family
    # (``cgroup_memory`` for cgroup_memory_peak_bytes): the longest key the metric starts with
    peer_reason = """(SELECT json_extract_string(u.peer_unavailable, '$."' || k || '"') FROM (SELECT unnest(json_keys(
        u.peer_unavailable)) AS k) WHERE starts_with(u.metric, k) ORDER BY length(k) DESC
        LIMIT 1)"""
    scalar_sql = _unpivoted(f"{scalars}, {totals}", "mw_rows", fallback=peer_reason)
    phases = _phases(["engine_phases"], BROWSER_PHASE_FIELDS)
    return f"{scalar_sql} UNION ALL {phases}"
