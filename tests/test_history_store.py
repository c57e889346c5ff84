"""The history store on a real DuckDB file and real runs: a run adds itself at its end, adding
is idempotent, a resumed run replaces its entry, kill -9 during add leaves the run absent or
whole, a peer run directory imports, unavailable values are NULL with a reason (never 0), the
values agree with compare's own readers, damaged or foreign files exit 2, v1 files migrate."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

import metewand.compare.compare_suites  # noqa: F401  (registers the suites suite_kind reads)
from metewand.compare.phase_costs import PHASE_FIELDS
from metewand.compare.rundir import load_run
from metewand.compare.suite_registry import suite_kind
from metewand.history import store
from metewand.history.ingest import ADDED, REPLACED, UNCHANGED, add_runs
from shared_paths import REPO_ROOT, SHARED, in_ci

METEWAND = [sys.executable, "-m", "metewand"]
PEER = SHARED / "reference" / "lexbench-run-sample"


def metewand(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    # without the suite's METEWAND_HISTORY (conftest): the default location is under test here
    base = {k: v for k, v in os.environ.items() if k != "METEWAND_HISTORY"}
    return subprocess.run(
        [*METEWAND, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=600,
    )


@pytest.fixture(scope="module")
def sorted_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real run of the sorting example's presorted experiment (30 attempts: what these tests
    need of a real run, in a fifth of the whole example's time); it adds itself to
    history.duckdb beside runs/."""
    work = tmp_path_factory.mktemp("history")
    done = run_presorted(REPO_ROOT / "examples/sorting", "s1", work)
    assert "history: added s1 " in done.stderr
    return work / "runs" / "s1"


def run_presorted(
    example: Path, run_id: str, cwd: Path, *more: str
) -> subprocess.CompletedProcess[str]:
    """The example's presorted experiment (30 attempts) run for real, into ``cwd/runs``."""
    done = metewand(
        "run",
        str(example / "metewand.toml"),
        "--experiment",
        "presorted",
        "--run-id",
        run_id,
        "--no-progress",
        *more,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def peer_dir(name: str) -> Path:
    path = PEER / name
    if not (path / "results.jsonl").is_file():
        if in_ci():
            pytest.fail(f"CI=true: peer sample missing at {path}")
        pytest.skip(f"peer sample missing at {path}")
    return path


def count(path: Path, sql: str) -> int:
    with store.reading(path) as con:
        return int(con.execute(sql).fetchone()[0])


def test_run_adds_itself_and_adding_again_changes_nothing(sorted_run: Path) -> None:
    history = sorted_run.parent.parent / "history.duckdb"
    rows = len((sorted_run / "results.jsonl").read_text().splitlines())
    values = count(history, "SELECT count(*) FROM attempt_values")
    assert count(history, "SELECT count(DISTINCT attempt_key) FROM attempt_values") == rows
    again = add_runs(history, [sorted_run])[0]
    assert again.outcome == UNCHANGED
    assert count(history, "SELECT count(*) FROM attempt_values") == values
    assert count(history, "SELECT count(*) FROM runs") == 1


def test_show_and_list_print_labels_as_written(sorted_run: Path) -> None:
    """Terminal tables take no markup from the data: a case label ends in ``[timing_scope]``,
    which rich would read as a style tag and drop."""
    work = sorted_run.parent.parent
    shown = metewand("history", "show", "--implementation", "python-heapsort", cwd=work)
    assert shown.returncode == 0, shown.stderr
    assert "[prepare_and_execute]" in shown.stdout
    listed = metewand("history", "list", cwd=work)
    assert listed.returncode == 0 and "s1" in listed.stdout


def test_show_draws_polluted_runs_red_in_the_trend(tmp_path: Path) -> None:
    """The trend column is the one cell with markup: a polluted run's bar is red, and no tag
    is printed as text (the synthetic store's run 3 is polluted)."""
    from metewand.history import synthetic

    synthetic.build(tmp_path / "history.duckdb", 8, 1)
    plain = metewand("history", "show", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    assert "trend" in plain.stdout and "[red]" not in plain.stdout, plain.stdout
    coloured = metewand("history", "show", cwd=tmp_path, env={"FORCE_COLOR": "1"})
    assert "\x1b[31m" in coloured.stdout and "[/red]" not in coloured.stdout, coloured.stdout


def test_values_agree_with_compares_readers(sorted_run: Path, tmp_path: Path) -> None:
    history = tmp_path / "h.duckdb"
    runs = [sorted_run, peer_dir("profiled_on"), peer_dir("functional")]
    add_runs(history, runs)
    with store.reading(history) as con:
        stored = {
            (key, metric): value
            for key, metric, value in con.execute(
                "SELECT attempt_key, metric, value FROM attempt_values WHERE counted"
            ).fetchall()
        }
    checked = 0
    for run_dir in runs:
        run = load_run(run_dir)
        kind = suite_kind(run.kind)
        for row in run.rows:
            key = row.get("key") or row.get("artifact_dir")
            for metric in kind.metrics:
                value = kind.value_of(row, metric)
                if value is not None:
                    assert stored[(key, metric)] == pytest.approx(value), (key, metric)
                    checked += 1
                elif (key, metric) in stored:
                    assert stored[(key, metric)] is None, (key, metric)
    assert checked > 300


def test_a_phase_marked_twice_keeps_its_first_form(sorted_run: Path, tmp_path: Path) -> None:
    """A phase name met twice in a row (within the implementation's marks, and again in the
    evaluator's) is stored once, with its first form, as compare's reader reads it."""
    run = tmp_path / "twice"
    shutil.copytree(sorted_run, run)
    lines = (run / "results.jsonl").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if json.loads(line)["status"] == "accepted")
    row = json.loads(lines[at])
    own = row["phases"]["implementation"]["phases"]
    name = own[0]["name"]
    again = {**own[0], "wall_time_ns": {"status": "complete", "value": 1}}
    own.append(again)
    row["phases"]["evaluator"]["phases"].append({**again, "cpu_time_ns": again["wall_time_ns"]})
    lines[at] = json.dumps(row)
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    history = tmp_path / "h.duckdb"
    add_runs(history, [run])
    with store.reading(history) as con:
        stored = con.execute(
            "SELECT metric, value FROM attempt_values WHERE attempt_key = $k AND metric LIKE $m",
            {"k": row["key"], "m": f"phase.{name}.%"},
        ).fetchall()
    kind = suite_kind(load_run(run).kind)
    assert sorted(m for m, _ in stored) == [f"phase.{name}.{f}" for f in sorted(PHASE_FIELDS)]
    for metric, value in stored:
        assert value == kind.value_of(row, metric) != 1, metric


def test_a_row_without_a_key_is_named_by_its_line(sorted_run: Path, tmp_path: Path) -> None:
    """Rows with no key are stored under ``line<N>``, N their line in results.jsonl, and each
    line's values are that row's (the stage keeps the file's order for its row ids)."""
    run = tmp_path / "keyless"
    shutil.copytree(sorted_run, run)
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    keys = [row.pop("key") for row in rows]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    by_key: dict[str, set[tuple[str, float | None]]] = {}
    for name, run_dir in (("keyed", sorted_run), ("keyless", run)):  # one run id: two stores
        history = tmp_path / f"{name}.duckdb"
        add_runs(history, [run_dir])
        with store.reading(history) as con:
            stored = con.execute(
                "SELECT attempt_key, metric, value FROM attempt_values WHERE counted"
            ).fetchall()
        for key, metric, value in stored:
            by_key.setdefault(key, set()).add((metric, value))
    named = {key for key in by_key if key.startswith("line")}
    counted = [i for i, row in enumerate(rows) if row["status"] == "accepted"]
    assert counted and named == {f"line{i + 1}" for i in counted}
    for i in counted:
        assert by_key[f"line{i + 1}"] == by_key[keys[i]], i


def test_a_row_larger_than_the_read_buffers_is_read(sorted_run: Path, tmp_path: Path) -> None:
    """A 40 MB row (the reader's buffers are sized for ordinary rows first) is read whole, as
    rows up to extract.MAX_ROW_BYTES are."""
    run = tmp_path / "wide"
    shutil.copytree(sorted_run, run)
    lines = (run / "results.jsonl").read_text().splitlines()
    row = json.loads(lines[0])
    row["message"] = "x" * (40 << 20)
    lines[0] = json.dumps(row)
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    added = add_runs(tmp_path / "h.duckdb", [run])[0]
    assert (added.outcome, added.attempts) == (ADDED, len(lines))


def test_unavailable_is_null_with_its_reason_never_zero(tmp_path: Path) -> None:
    history = tmp_path / "h.duckdb"
    add_runs(history, [peer_dir("profiled_on")])
    with store.reading(history) as con:
        found = con.execute(
            "SELECT form, value, reason FROM attempt_values WHERE metric = "
            "'cgroup_memory_peak_bytes'"
        ).fetchall()
    assert found and all(f == ("unavailable", None, "cgroup v2 backend unavailable") for f in found)
    with store.writing(history) as con, pytest.raises(duckdb.ConstraintException):
        con.execute(
            "INSERT INTO attempt_values VALUES ('x', 't', 's', '', 'k', 'pass', true, "
            "'m', 'unavailable', 0, 'no')"
        )


def test_peer_run_directory_imports(tmp_path: Path) -> None:
    history = tmp_path / "h.duckdb"
    added = add_runs(history, [peer_dir("functional")])[0]
    assert (added.outcome, added.suite, added.attempts) == (ADDED, "browser", 10)
    with store.reading(history) as con:
        layout, commit, state = con.execute("SELECT layout, git_commit, state FROM runs").fetchone()
        engines = {
            r[0] for r in con.execute("SELECT DISTINCT subject FROM attempt_values").fetchall()
        }
    assert (layout, commit, state) == ("peer", None, "completed")
    assert engines == {"chrome", "lightpanda"}


def test_resumed_run_replaces_its_entry(sorted_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "runs" / "s1"
    shutil.copytree(sorted_run, run)
    lines = (sorted_run / "results.jsonl").read_bytes().splitlines(keepends=True)
    (run / "results.jsonl").write_bytes(b"".join(lines[:7]) + lines[7][:40])  # killed mid-row
    history = tmp_path / "h.duckdb"
    first = add_runs(history, [run])[0]
    assert (first.outcome, first.attempts) == (ADDED, 7) and first.torn_tail_bytes == 40
    (run / "results.jsonl").write_bytes(b"".join(lines))  # as `run --resume` finishes it
    second = add_runs(history, [run])[0]
    assert (second.outcome, second.attempts) == (REPLACED, len(lines))
    assert count(history, "SELECT count(*) FROM runs") == 1
    assert count(history, "SELECT count(DISTINCT attempt_key) FROM attempt_values") == len(lines)


def _big_run(sorted_run: Path, dest: Path, copies: int) -> int:
    """The real run's rows repeated under new keys: a run large enough to kill mid-add."""
    shutil.copytree(sorted_run, dest)
    lines = (sorted_run / "results.jsonl").read_text().splitlines()
    out = []
    for i in range(copies):
        for line in lines:
            row = json.loads(line)
            row["key"] = f"c{i}/{row['key']}"
            out.append(json.dumps(row))
    (dest / "results.jsonl").write_text("\n".join(out) + "\n")
    return len(out)


def test_kill_9_during_add_leaves_the_run_absent_or_whole(sorted_run: Path, tmp_path: Path) -> None:
    """Killed at moments counted from the store file's appearing (an event, not a guess of how
    long an import takes): the next writer finds the run absent or whole, never in part."""
    rows = _big_run(sorted_run, tmp_path / "big", 300)  # 9,000 rows: an add of ~1 s
    history = tmp_path / "h.duckdb"
    outcomes = []
    for delay in (0.0, 0.05, 0.3, 2.0):
        for leftover in (history, Path(f"{history}.wal")):
            leftover.unlink(missing_ok=True)
        proc = subprocess.Popen(
            [*METEWAND, "history", "add", str(tmp_path / "big"), "--history", str(history)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while not history.exists() and proc.poll() is None:
            time.sleep(0.005)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        with store.writing(history) as con:  # as the next `add` would open it
            runs = con.execute("SELECT count(*) FROM runs").fetchone()[0]
            keys = con.execute("SELECT count(DISTINCT attempt_key) FROM attempt_values").fetchone()[
                0
            ]
        assert (runs, keys) in ((0, 0), (1, rows)), (delay, runs, keys)
        outcomes.append("whole" if runs else "absent")
    assert "absent" in outcomes, outcomes  # the kill at the file's appearing hit mid-add


def test_a_writer_killed_while_it_creates_the_store_leaves_it_readable(
    sorted_run: Path, tmp_path: Path
) -> None:
    """Killed the moment any file of the store appears. DuckDB creates a new file before it
    writes its header: before the store was made under a private name and linked into place,
    13 of 30 such kills left a file no later open could read (0, 4096 or 8192 bytes)."""
    seen_drafts = 0
    for attempt in range(12):
        folder = tmp_path / str(attempt)
        folder.mkdir()
        history = folder / "h.duckdb"
        proc = subprocess.Popen(
            [*METEWAND, "history", "add", str(sorted_run), "--history", str(history)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while proc.poll() is None and not any(folder.iterdir()):
            pass  # no sleep: the window between a file's creation and its header is short
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        seen_drafts += any(store.DRAFT_MARK in p.name for p in folder.iterdir())
        with store.writing(history) as con:  # as the next `add` would open it
            assert con.execute("SELECT count(*) FROM runs").fetchone()[0] in (0, 1)
        assert [p.name for p in folder.iterdir()] == ["h.duckdb"]  # the dead draft is gone
    assert seen_drafts, "no kill landed while the store was being made"


def test_damaged_row_and_foreign_or_corrupt_files_exit_2(sorted_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "runs" / "bad"
    shutil.copytree(sorted_run, run)
    lines = (run / "results.jsonl").read_text().splitlines()
    (run / "results.jsonl").write_text("\n".join([lines[0], "{not json", *lines[1:]]) + "\n")
    done = metewand("history", "add", str(run), "--history", "h.duckdb", cwd=tmp_path)
    assert done.returncode == 2 and "results.jsonl:2:" in done.stderr, done.stderr
    text_file = tmp_path / "notes.duckdb"
    text_file.write_text("hello\n" * 100)
    foreign = tmp_path / "foreign.duckdb"
    duckdb.connect(str(foreign)).execute("CREATE TABLE t (x INT)").close()
    truncated = tmp_path / "truncated.duckdb"
    add_runs(truncated, [sorted_run])
    data = truncated.read_bytes()
    truncated.write_bytes(data[: len(data) // 3])
    for path in (text_file, foreign, truncated):
        done = metewand("history", "list", "--history", str(path), cwd=tmp_path)
        assert done.returncode == 2, (path, done.stderr)
        assert str(path) in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_version_1_file_migrates(sorted_run: Path, tmp_path: Path) -> None:
    old = tmp_path / "v1.duckdb"
    con = duckdb.connect(str(old))
    for statement in store.SCHEMA_V1:
        con.execute(statement)
    con.execute("INSERT INTO meta VALUES ('format', 'metewand-history'), ('schema_version', '1')")
    con.close()
    added = add_runs(old, [sorted_run])[0]  # opening for write migrates first
    assert added.outcome == ADDED
    with store.reading(old) as con:
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
            str(store.SCHEMA_VERSION),
        )
        assert con.execute("SELECT count(git_commit_time) FROM runs").fetchone() == (1,)
        assert con.execute("SELECT count(*) FROM group_inputs").fetchone()[0] >= 3
    with store.writing(old) as con:
        con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    done = metewand("history", "list", "--history", str(old), cwd=tmp_path)
    assert done.returncode == 2 and "newer metewand" in done.stderr


def test_env_names_the_store_and_parquet_round_trips(sorted_run: Path, tmp_path: Path) -> None:
    env = {"METEWAND_HISTORY": str(tmp_path / "env.duckdb")}
    done = metewand("history", "add", str(sorted_run), cwd=tmp_path, env=env)
    assert done.returncode == 0 and (tmp_path / "env.duckdb").is_file(), done.stderr
    done = metewand("history", "export", "--parquet", "pq", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    for _ in range(2):
        done = metewand(
            "history", "import", "--parquet", "pq", "--history", "copy.duckdb", cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
    assert "0 runs added, 0 replaced, 1 unchanged" in done.stdout
    for table in ("attempt_values", "group_inputs"):
        sql = f"SELECT count(*) FROM {table}"
        assert count(tmp_path / "copy.duckdb", sql) == count(tmp_path / "env.duckdb", sql) > 0
    # an export written before group_inputs (schema 2) imports: its groups' inputs are unknown
    shutil.rmtree(tmp_path / "pq" / "group_inputs")
    con = duckdb.connect()
    meta = str(tmp_path / "pq" / "meta.parquet")
    con.execute(
        f"COPY (SELECT format, 2 AS schema_version FROM read_parquet('{meta}')) TO "
        f"'{tmp_path / 'meta2.parquet'}' (FORMAT parquet)"
    )
    con.close()
    shutil.move(tmp_path / "meta2.parquet", meta)
    done = metewand("history", "import", "--parquet", "pq", "--history", "v2.duckdb", cwd=tmp_path)
    assert done.returncode == 0 and "1 runs added" in done.stdout, (done.stdout, done.stderr)
    assert count(tmp_path / "v2.duckdb", "SELECT count(*) FROM group_inputs") == 0


def _plan_identities(manifest: Path, cwd: Path) -> dict[str, str]:
    """implementation -> the identity digest its attempt keys carry, from ``metewand plan``."""
    done = metewand("plan", str(manifest), cwd=cwd)
    assert done.returncode == 0, done.stderr
    found: dict[str, str] = {}
    for word in done.stdout.split():
        for part in word.split("/"):
            name, at, digest = part.partition("@")
            if at and name in ("python-builtin", "python-heapsort", "c-mergesort"):
                found[name] = digest
    assert len(found) == 3, done.stdout[-2000:]
    return found


def test_group_inputs_follow_each_groups_declared_sources(sorted_run: Path, tmp_path: Path) -> None:
    """Every group of a run has its declared inputs' digest; a change to one implementation's
    file changes that implementation's groups only; a change to the module the Python workers
    import, declared in their ``source_files`` (the evaluator's too, which every
    implementation's problem names), changes every implementation's identity."""
    history = sorted_run.parent.parent / "history.duckdb"
    groups = count(history, "SELECT count(DISTINCT (task, subject, driver)) FROM attempt_values")
    assert count(history, "SELECT count(*) FROM group_inputs") == groups >= 3
    example = tmp_path / "sorting"
    shutil.copytree(REPO_ROOT / "examples/sorting", example, ignore=shutil.ignore_patterns("runs"))
    before = _plan_identities(example / "metewand.toml", tmp_path)
    with open(example / "workers/common.py", "a") as handle:
        handle.write("# a change both Python implementations import\n")
    after = _plan_identities(example / "metewand.toml", tmp_path)
    assert all(before[k] != after[k] for k in before), (before, after)
    shutil.copy(REPO_ROOT / "examples/sorting/workers/common.py", example / "workers/common.py")
    with open(example / "workers/heapsort.py", "a") as handle:
        handle.write("# a change to heapsort alone\n")
    run_presorted(example, "s2", tmp_path, "--no-history")
    both = tmp_path / "both.duckdb"
    add_runs(both, [sorted_run, tmp_path / "runs" / "s2"])
    with store.reading(both) as con:
        moved = con.execute(
            """SELECT DISTINCT a.subject FROM group_inputs a JOIN group_inputs b
               USING (task, subject, driver) WHERE a.run_uid < b.run_uid AND a.inputs <> b.inputs"""
        ).fetchall()
        kept = con.execute(
            """SELECT count(*) FROM group_inputs a JOIN group_inputs b
               USING (task, subject, driver) WHERE a.run_uid < b.run_uid AND a.inputs = b.inputs"""
        ).fetchone()[0]
    assert [m[0] for m in moved] == ["python-heapsort"], moved
    assert kept == groups - 1, kept


def test_a_browser_runs_groups_have_their_declared_inputs(tmp_path: Path) -> None:
    """A real browser run (the built-in suite, Lightpanda) adds its groups' inputs (the corpus,
    the runner's source tree, the task version, the engine binary, the driver version); a
    second run of the same everything has the same."""
    for run_id in ("b1", "b2"):
        done = metewand(
            "browser",
            "run",
            "--engines",
            "lightpanda",
            "--k",
            "1",
            "--task",
            "own_ax_tree",
            "--task",
            "own_l2_inner_text",
            "--run-id",
            run_id,
            "--no-progress",
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr[-2000:]
    history = tmp_path / "history.duckdb"
    with store.reading(history) as con:
        lines = con.execute(
            "SELECT r.run_id, g.task, g.subject, g.inputs FROM group_inputs g JOIN runs r "
            "USING (run_uid) ORDER BY 1, 2"
        ).fetchall()
    by_run: dict[str, dict[str, str]] = {}
    for run_id, task, subject, inputs in lines:
        assert subject == "lightpanda", lines
        by_run.setdefault(run_id, {})[task] = inputs
    assert set(by_run["b1"]) == {"own_ax_tree", "own_l2_inner_text"}, lines
    assert by_run["b1"] == by_run["b2"], lines
    assert all(len(v) == 64 for v in by_run["b1"].values()), lines  # sha256 hex digests
