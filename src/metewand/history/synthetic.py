"""Synthetic histories with known properties, written straight into a store: for the error-rate
tests and ``benchmarks/history_scale.py`` (1,000 runs x 100 groups would take days as real runs).
Every value is generated in DuckDB; nothing here is used by a real run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from metewand.history.store import writing

RUNS_SQL = """
INSERT INTO runs (run_uid, run_id, suite, layout, state, started_at, ended_at, metewand_version,
                  git_commit, git_branch, git_dirty, git_commit_time, tree_path, host_fingerprint,
                  host, identities, pollution_passed, pollution, rows_total, content_sha256,
                  run_dir, added_at)
SELECT 'syn' || i, 'syn' || lpad(i::VARCHAR, 5, '0'), $suite, 'metewand', 'complete',
       TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_minutes(i::BIGINT),
       TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_minutes(i::BIGINT) + to_seconds(30),
       'synthetic', md5('commit' || i), 'main', false,
       TIMESTAMPTZ '2026-01-01 00:00:00+00' + to_minutes(i::BIGINT), NULL, 'synthetic',
       '{}', '{}', i % 7 <> 3, '[]', $groups * $attempts, md5('content' || i), NULL, now()
FROM range($runs) t(i)
"""

# log-normal noise around 1e6 (Box-Muller from DuckDB's uniform random()), times a step factor
# and a drift of the run that moves all its groups alike (log-normal, sd ``drift``; the run's
# two uniforms come from a hash of the run and the seed, so that every row of the run shares it)
VALUES_SQL = """
INSERT INTO attempt_values
SELECT 'syn' || r, 'case ' || lpad(g::VARCHAR, 3, '0'), 'impl ' || (g % 5)::VARCHAR, '',
       'syn' || r || '/' || g || '/' || a, 'accepted', true, $metric, 'complete',
       1e6 * exp($sigma * sqrt(-2 * ln(1 - random())) * cos(2 * pi() * random()))
           * CASE WHEN g < $step_groups AND r >= $step_at THEN 1 + $step ELSE 1 END
           * exp($drift * sqrt(-2 * ln(1 - (hash('u' || r || $seed) % 1000000 + 0.5) / 1e6))
                 * cos(2 * pi() * (hash('v' || r || $seed) % 1000000) / 1e6)),
       NULL
FROM range($runs) t1(r), range($groups) t2(g), range($attempts) t3(a)
"""

# each group's declared inputs: one digest per group, another from ``step_at`` on for the groups
# below ``inputs_groups`` (a commit that changed them)
INPUTS_SQL = """
INSERT INTO group_inputs
SELECT 'syn' || r, 'case ' || lpad(g::VARCHAR, 3, '0'), 'impl ' || (g % 5)::VARCHAR, '',
       md5('inputs' || g || CASE WHEN g < $inputs_groups AND r >= $step_at THEN 'new' ELSE '' END)
FROM range($runs) t1(r), range($groups) t2(g)
"""


def build(
    path: Path,
    runs: int,
    groups: int,
    attempts: int = 3,
    metric: str = "cpu_time_ns",
    sigma: float = 0.03,
    step: float = 0.0,
    step_at: int = 0,
    step_groups: int = 0,
    seed: float = 0.5,
    inputs_groups: int | None = None,
    drift: float = 0.0,
) -> None:
    """A compute history of ``runs`` runs x ``groups`` groups, ``attempts`` values each; groups
    below ``step_groups`` step by ``step`` from run ``step_at`` on; runs with i % 7 == 3 are
    marked polluted; ``drift``: sd (log) of a factor per run shared by its groups. With ``inputs_groups``, every group's declared inputs are known, and those
    of the groups below it change at ``step_at`` (None: no group's inputs are known)."""
    params: dict[str, Any] = {
        "runs": runs,
        "groups": groups,
        "attempts": attempts,
        "suite": "compute",
    }
    with writing(path) as con:
        con.execute("SELECT setseed($seed)", {"seed": seed})
        con.execute("BEGIN TRANSACTION")
        con.execute(RUNS_SQL, params)
        con.execute(
            VALUES_SQL,
            {
                "runs": runs,
                "groups": groups,
                "attempts": attempts,
                "metric": metric,
                "sigma": sigma,
                "step": step,
                "step_at": step_at,
                "step_groups": step_groups,
                "drift": drift,
                "seed": str(seed),
            },
        )
        if inputs_groups is not None:
            con.execute(
                INPUTS_SQL,
                {
                    "runs": runs,
                    "groups": groups,
                    "step_at": step_at,
                    "inputs_groups": inputs_groups,
                },
            )
        con.execute("COMMIT")
