"""The run history (issue #23): every run kept in one embedded DuckDB file, its metrics over
commits per group, and the change points found in them.

Layer: above ``compare`` (it reads runs through compare's suite kinds and labels), below ``cli``.
``store`` owns the file (schema, versions, migrations, locking), ``ingest`` adds a run directory,
``series`` reads a metric back per group and run, ``changepoints`` finds the steps, ``check``
judges the newest run, ``site`` writes the static report, ``parquet`` moves a store elsewhere.
"""
