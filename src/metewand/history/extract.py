"""Which values the history keeps from a run's rows, and the SQL that pulls them out.

A 20,000-row run is ~230 MB of JSON (a real row of either suite is 11-13 KB). Python's parser
needs tens of seconds for it on this host; DuckDB's reader (C++, yyjson) parses it in a fraction
of a second when it is told the *shape* of the few fields kept: each column below is a typed
STRUCT reaching only the paths read, so everything else in a row is skipped by the parser
instead of being turned into values (reading the same fields as JSON text, to be re-parsed by
``json_extract`` per metric, cost ~10x more). What the SQL reads is declared here, beside the
reader in ``compare`` it mirrors, and ``tests/test_history_store.py`` checks the two agree value
for value on real runs:

- compute (``compare.compute_rows``): ``measurements_of(row)``'s forms for each of
  ``compare.labels.CASE_METRICS`` (the observation's, else the failure diagnostic's, else the
  attempt record's), the tree's kernel memory high-water (``tree_memory``), and each phase of
  the implementation's and the evaluator's marks (``compare.phase_costs``);
- browser (``compare.compare_suites``): ``duration_ms``, the resource metrics of profiled runs
  (``resource_forms`` as forms, else the peer's plain numbers with their ``unavailable`` map) and
  the engine's phases (``compare.browser_phases``), with their total as ``phase.total.*``.

A value is kept with its form: ``complete`` and ``partial`` with a number, ``unavailable`` with
NULL and the reason (the form's, the peer's ``unavailable`` entry, or what stood there instead of
a number). A metric a row does not have (an unprofiled run's resource figures; a form that is
absent or null) is not a line. A row whose shape differs from the row schema where a value is
read (an object where a form should be is a number) is refused naming the file and line.
"""

from __future__ import annotations

from metewand.compare.labels import CASE_METRICS
from metewand.compare.resource_metrics import BROWSER_RESOURCE_METRICS

TREE_MEMORY_METRIC = "kernel_tree_memory_high_water_bytes"
COMPUTE_PHASE_FIELDS = {
    "wall_ns": "wall_time_ns",
    "cpu_ns": "cpu_time_ns",
    "memory_peak_bytes": "memory_peak_bytes",
}
BROWSER_PHASE_FIELDS = {"wall_ns": "wall_time_ns", "cpu_ns": "cpu_time_ns"}
TOTAL = "total"  # phase.total.<field>: the engine group's whole attempt (browser)
MAX_ROW_BYTES = 64 << 20  # the largest row read
READ_ROW_BYTES = 16 << 20  # what the reader's buffers are sized for first (DuckDB's default)

# A measurement form; its value stays JSON text so a non-number is told from a number.
FORM = "STRUCT(status VARCHAR, value JSON, reason VARCHAR)"


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _struct(fields: dict[str, str]) -> str:
    return "STRUCT(" + ", ".join(f"{_quoted(k)} {v}" for k, v in fields.items()) + ")"


def _nested(path: str, leaf: str) -> str:
    """``a.b.c`` reaching ``leaf``: STRUCT(a STRUCT(b STRUCT(c leaf)))."""
    for name in reversed(path.split(".")):
        leaf = _struct({name: leaf})
    return leaf


MEASUREMENTS = _struct({m: FORM for m in CASE_METRICS})
TREE_MEMORY = _struct({TREE_MEMORY_METRIC: FORM})
COMPUTE_PHASES = _struct(
    {
        "phases": _struct({"name": "VARCHAR", **{f: FORM for f in COMPUTE_PHASE_FIELDS.values()}})
        + "[]"
    }
)
DATA = _struct({"measurements": MEASUREMENTS, "tree_memory": TREE_MEMORY})
COMPUTE_COLUMNS = {
    "key": "VARCHAR",
    "status": "VARCHAR",
    "role": "VARCHAR",
    "calibration_twin": "JSON",
    "implementation": "VARCHAR",
    "implementation_parameters": "JSON",
    "experiment": "JSON",
    "case": "JSON",
    "dataset": "JSON",
    "dataset_parameters": "JSON",
    "problem": "JSON",
    "problem_parameters": "JSON",
    "timing_scope": "JSON",
    "observation": _nested("provenance.data", DATA),
    "record": _struct(
        {
            "outcome": _nested("diagnostic.details.measurements", MEASUREMENTS),
            "provenance": _struct({"data": DATA}),
        }
    ),
    "phases": _struct({"implementation": COMPUTE_PHASES, "evaluator": COMPUTE_PHASES}),
    "candidate": "JSON",
}

BROWSER_PHASE = _struct({"name": "VARCHAR", **{f: FORM for f in BROWSER_PHASE_FIELDS.values()}})
BROWSER_COLUMNS = {
    "key": "VARCHAR",
    "artifact_dir": "VARCHAR",
    "attempt": "JSON",
    "status": "VARCHAR",
    "calibration_twin": "JSON",
    "task_id": "VARCHAR",
    "engine": "VARCHAR",
    "driver_path": "VARCHAR",
    "driver": "VARCHAR",
    "task_version": "JSON",
    "driver_version": "JSON",
    "engine_provenance": "JSON",
    "duration_ms": "JSON",
    # the peer's layout: plain numbers, null where nothing was measured (its reason in
    # ``unavailable``); small, so kept as JSON and read by the generic macros below
    "resource": "JSON",
    "resource_forms": _struct({m: FORM for m in BROWSER_RESOURCE_METRICS}),
    "phases": _struct(
        {
            "engine": _struct(
                {
                    "phases": BROWSER_PHASE + "[]",
                    "total": _struct({f: FORM for f in BROWSER_PHASE_FIELDS.values()}),
                }
            )
        }
    ),
}


def _columns(columns: dict[str, str]) -> str:
    return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in columns.items()) + "}"


def _reader(columns: dict[str, str]) -> str:
    return (
        f"read_json($path, format = 'newline_delimited', maximum_object_size = $max_bytes, "
        f"columns = {_columns(columns)})"
    )


COMPUTE_READ = f"""
SELECT key, status, role, calibration_twin,
       implementation, implementation_parameters,
       json_object('experiment', experiment, 'case', "case", 'dataset', dataset,
                   'dataset_parameters', dataset_parameters, 'problem', problem,
                   'problem_parameters', problem_parameters,
                   'timing_scope', timing_scope)::VARCHAR AS coords,
       coalesce(observation.provenance.data.measurements,
                record.outcome.diagnostic.details.measurements,
                record.provenance.data.measurements) AS measurements,
       coalesce(observation.provenance.data.tree_memory,
                record.provenance.data.tree_memory) AS tree_memory,
       phases.implementation.phases AS phases_0, phases.evaluator.phases AS phases_1,
       json_extract_string(candidate, '$') AS inputs
FROM {_reader(COMPUTE_COLUMNS)}
"""

BROWSER_READ = f"""
SELECT coalesce(key, artifact_dir, task_id || '/' || engine || '/' || attempt::VARCHAR) AS key,
       status, calibration_twin, task_id, engine,
       coalesce(driver_path, driver, 'unknown') AS driver,
       resource_forms, phases.engine.total AS total, phases.engine.phases AS phases_0,
       duration_ms, CASE WHEN resource_forms IS NULL THEN resource END AS peer_resource,
       CASE WHEN json_extract_string(engine_provenance, '$.binary_sha256') IS NOT NULL
            THEN concat_ws(' ', 'task_version=' || coalesce(task_version::VARCHAR, 'null'),
                           'engine=' || json_extract_string(engine_provenance, '$.binary_sha256'),
                           'driver_version=' || coalesce(driver_version::VARCHAR, 'null'))
       END AS inputs
FROM {_reader(BROWSER_COLUMNS)}
"""


# What each value line carries of its attempt (``ingest`` stages them as ``mw_attempts``).
ATTEMPT_COLUMNS = "task, subject, driver, attempt_key, status, counted"
# The read columns a staged row keeps beside its forms, per suite.
KEPT_COLUMNS = {
    "compute": (
        "key",
        "status",
        "role",
        "calibration_twin",
        "implementation",
        "implementation_parameters",
        "coords",
        "inputs",
    ),
    "browser": (
        "key",
        "status",
        "calibration_twin",
        "task_id",
        "engine",
        "driver",
        "duration_ms",
        "peer_resource",
        "inputs",
    ),
}
# The staged columns the values are read from, per suite.
SOURCE_COLUMNS = {"compute": ("forms",), "browser": ("forms", "duration_ms", "peer_resource")}
# Of the read columns, the lists of phase marks (in the order their phases count), and each
# phase's fields.
PHASE_COLUMNS = {"compute": ("phases_0", "phases_1"), "browser": ("phases_0",)}
PHASE_FIELDS = {"compute": COMPUTE_PHASE_FIELDS, "browser": BROWSER_PHASE_FIELDS}


def _entry(metric: str, form: str) -> str:
    return f"{{'metric': {metric}, 'f': {form}}}"


def _named_forms(suite: str) -> dict[str, str]:
    """metric -> the SQL of its form, for the metrics a row names outright."""
    if suite == "compute":
        scalars = {m: f"measurements.{_quoted(m)}" for m in CASE_METRICS}
        scalars[TREE_MEMORY_METRIC] = f"tree_memory.{TREE_MEMORY_METRIC}"
        return scalars
    scalars = {m: f"resource_forms.{_quoted(m)}" for m in BROWSER_RESOURCE_METRICS}
    scalars.update(
        {f"phase.{TOTAL}.{short}": f"total.{long}" for short, long in BROWSER_PHASE_FIELDS.items()}
    )
    return scalars


def _entries(suite: str) -> str:
    """One list per attempt of its forms, ``{metric, f}``: the named forms, then
    ``phase.<name>.<field>`` of each named phase in order (the first list's, then the next's)."""
    named = ", ".join(_entry(_literal(m), sql) for m, sql in _named_forms(suite).items())
    per_phase = ", ".join(
        _entry(f"'phase.' || p.name || '.{short}'", f"p.{long}")
        for short, long in PHASE_FIELDS[suite].items()
    )
    phases = (
        f"flatten(list_transform(list_filter(list_concat({', '.join(PHASE_COLUMNS[suite])}), "
        f"lambda p: p.name IS NOT NULL), lambda p: [{per_phase}]))"
    )
    return f"list_concat([{named}], {phases})"


def _no_metric_twice(suite: str) -> str:
    """True when an attempt cannot name a metric twice: its phase names are distinct and none
    is a phase a named metric already spells (``phase.total.*``). The fields' suffixes differ,
    so distinct names make distinct metrics; this reads only the names (cheaper than
    comparing the 27 metrics of every row)."""
    names = (
        "list_concat("
        + ", ".join(f"list_transform({c}, lambda p: p.name)" for c in PHASE_COLUMNS[suite])
        + ")"
    )
    taken = sorted({m.split(".")[1] for m in _named_forms(suite) if m.startswith("phase.")})
    spelled = ", ".join(_literal(name) for name in taken)
    return (
        f"list_unique(list_concat({names}, [{spelled}]::VARCHAR[])) = "
        f"coalesce(list_aggregate({names}, 'count'), 0) + {len(taken)}"
    )


def _staging(read: str, suite: str) -> str:
    """The read rows with each one's forms, ``{metric, f}``, in place of the columns they come
    from. A form that is absent or null is left out; a metric met twice (a phase name marked
    twice) keeps its first form, as the readers in compare do. Duplicates are rare, so the
    first-of-each filter (a search per form) runs only on a row that may have one.

    Why here, in the read: DuckDB reads the file on every core, but scans a staged table of
    20,000 rows (one row group) on one; building the lists there cost a 20,000-row run ~0.3 s."""
    kept = ", ".join(KEPT_COLUMNS[suite])
    metrics = "list_transform(forms, lambda x: x.metric)"
    first_of_each = f"list_filter(forms, lambda x, i: list_position({metrics}, x.metric) = i)"
    return f"""
SELECT {kept}, CASE WHEN once THEN forms ELSE {first_of_each} END AS forms
FROM (SELECT {kept}, list_filter({_entries(suite)}, lambda x: x.f IS NOT NULL) AS forms,
             {_no_metric_twice(suite)} AS once
      FROM ({read}))"""


COMPUTE_STAGE = _staging(COMPUTE_READ, "compute")
BROWSER_STAGE = _staging(BROWSER_READ, "browser")


def _forms_sql() -> str:
    """(attempt columns, metric, f): every form of the staged attempts."""
    return f"""
    SELECT {ATTEMPT_COLUMNS}, e.metric AS metric, e.f AS f
    FROM (SELECT {ATTEMPT_COLUMNS}, unnest(forms) AS e FROM mw_attempts)"""


def _form_lines(suite: str) -> str:
    """(attempt columns, metric, form, value, reason) of every form; its number is its JSON
    text cast (a string keeps its quotes, so it is not a number)."""
    return f"""
    SELECT {ATTEMPT_COLUMNS}, metric,
           CASE WHEN measured THEN f.status ELSE 'unavailable' END AS form,
           CASE WHEN measured THEN number END AS value,
           CASE WHEN NOT measured THEN coalesce(f.reason, 'form without a number') END AS reason
    FROM (SELECT {ATTEMPT_COLUMNS}, metric, f, TRY_CAST(f.value::VARCHAR AS DOUBLE) AS number,
                 coalesce(f.status IN ('complete', 'partial') AND number IS NOT NULL, false)
                     AS measured
          FROM ({_forms_sql()}))
    """


# Plain JSON values (browser): the duration, and the peer's resource record (plain numbers, or
# the forms of an older row). Few and small, so the generic JSON functions read them: a number
# (or a measured form) is a value; anything else is unavailable with the peer's reason (its
# ``unavailable`` entry with the longest key the metric starts with) or what stood there.
MACROS = (
    """CREATE OR REPLACE TEMP MACRO mw_num(x) AS
        CASE WHEN json_type(x) IN ('BIGINT', 'UBIGINT', 'DOUBLE') THEN TRY_CAST(x AS DOUBLE) END""",
    """CREATE OR REPLACE TEMP MACRO mw_form(x) AS CASE
        WHEN json_type(x) = 'OBJECT' THEN CASE
            WHEN json_extract_string(x, '$.status') IN ('complete', 'partial')
                 AND mw_num(json_extract(x, '$.value')) IS NOT NULL
            THEN json_extract_string(x, '$.status') ELSE 'unavailable' END
        WHEN mw_num(x) IS NOT NULL THEN 'complete'
        ELSE 'unavailable' END""",
    """CREATE OR REPLACE TEMP MACRO mw_value(x) AS
        CASE WHEN mw_form(x) = 'unavailable' THEN NULL
             WHEN json_type(x) = 'OBJECT' THEN mw_num(json_extract(x, '$.value'))
             ELSE mw_num(x) END""",
    """CREATE OR REPLACE TEMP MACRO mw_reason(x, fallback) AS
        CASE WHEN mw_form(x) <> 'unavailable' THEN NULL
             ELSE coalesce(json_extract_string(x, '$.reason'), fallback,
                           CASE json_type(x) WHEN 'NULL' THEN 'null'
                                WHEN 'OBJECT' THEN 'form without a number'
                                ELSE 'not a number (' || lower(json_type(x)) || ')' END) END""",
)


def _plain_lines() -> str:
    entries = ["{'metric': 'duration_ms', 'x': duration_ms}"] + [
        f"{{'metric': {_literal(m)}, 'x': json_extract(peer_resource, {_literal('$.' + m)})}}"
        for m in BROWSER_RESOURCE_METRICS
    ]
    peer_reason = """(SELECT json_extract_string(unavailable, '$."' || k || '"')
        FROM (SELECT unnest(json_keys(unavailable)) AS k)
        WHERE starts_with(metric, k) ORDER BY length(k) DESC LIMIT 1)"""
    return f"""
    SELECT {ATTEMPT_COLUMNS}, metric, mw_form(x) AS form, mw_value(x) AS value,
           mw_reason(x, {peer_reason}) AS reason
    FROM (SELECT {ATTEMPT_COLUMNS}, e.metric AS metric, e.x AS x,
                 json_extract(peer_resource, '$.unavailable') AS unavailable
          FROM (SELECT {ATTEMPT_COLUMNS}, peer_resource, unnest([{", ".join(entries)}]) AS e
                FROM mw_attempts))
    WHERE x IS NOT NULL
    """


def values_sql(suite: str) -> str:
    """(attempt columns, metric, form, value, reason) of every value of the staged attempts
    ``mw_attempts`` (``ATTEMPT_COLUMNS`` and ``SOURCE_COLUMNS``)."""
    if suite == "compute":
        return _form_lines(suite)
    return f"{_form_lines(suite)} UNION ALL {_plain_lines()}"
