"""Every command README.md and the ``--help`` Examples show runs as written, from the root of a
fresh copy of the repository, with the documented relative paths, and does what it says.

Each documented command has an expectation below (exit status and a check of its outcome);
a documented command without one fails ``test_every_documented_command_has_an_expectation``.
Commands run once, in the order below (later ones read the runs earlier ones made: sort1,
base1, prof1, lex1). ``make test`` (this suite itself) and the full demo (``make demo``,
``metewand demo``: a compute run and a k=5 profiled browser run with interleaved twins, about three minutes on a quiet host;
``--full``: the whole built-in suite, many minutes) run only with METEWAND_LONG_EXAMPLES=1.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from doc_commands import help_examples, make_workspace, normalized, readme_commands, run_in
from shared_paths import REPO_ROOT, lexbench_or_skip

pytestmark = [pytest.mark.slow, pytest.mark.engines]
Done = subprocess.CompletedProcess[str]
Check = Callable[[Done, Path], None]
LONG = os.environ.get("METEWAND_LONG_EXAMPLES") == "1"


def _rows(repo: Path, run: str) -> list[dict]:
    path = repo / "runs" / run / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def _newest(repo: Path, under: str = "runs") -> Path:
    runs = [p.parent for p in (repo / under).glob("*/run_manifest.json")]
    return max(runs, key=lambda p: (p / "run_manifest.json").stat().st_mtime_ns)


def _statuses(rows: list[dict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    return counts


# the sorting example's one-experiment runs (sort1, sort2, sort3, sortd: --experiment presorted)
PRESORTED = "presorted"


@functools.cache
def planned(repo: Path, experiment: str | None = None) -> int:
    """How many attempts the sorting example (or one experiment of it) plans (the example may
    grow; its plan says)."""
    only = f" --experiment {experiment}" if experiment else ""
    done = run_in(repo, f"metewand plan examples/sorting/metewand.toml --json{only}")
    assert done.returncode == 0, done.stderr
    return len(done.stdout.splitlines())


def _accepts_all(done: Done, repo: Path, experiment: str | None) -> None:
    run, n = _newest(repo), planned(repo, experiment)
    rows = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert _statuses(rows) == {"accepted": n}, [r.get("message") for r in rows][:3]
    manifest = json.loads((run / "run_manifest.json").read_text())
    assert manifest["state"] == "complete"
    assert Path(manifest["data"]["manifest_path"]).is_absolute()
    assert manifest["data"]["selected_experiments"] == ([experiment] if experiment else None)
    assert f"{n} attempts: {n} accepted, 0 failed" in done.stdout


def sorting_accepts_all(done: Done, repo: Path) -> None:
    _accepts_all(done, repo, None)


def presorted_accepts_all(done: Done, repo: Path) -> None:
    _accepts_all(done, repo, PRESORTED)


def sorting_without_marks(done: Done, repo: Path) -> None:
    presorted_accepts_all(done, repo)
    manifest = json.loads((repo / "runs" / "sort3" / "run_manifest.json").read_text())
    assert manifest["data"]["phase_marks"] is False
    assert all(row["phases"] is None for row in _rows(repo, "sort3"))


def sorting_on_dask(done: Done, repo: Path) -> None:
    presorted_accepts_all(done, repo)
    hosts = json.loads((repo / "runs" / "sortd" / "dask_hosts.json").read_text())
    accepted = {worker["worker"] for worker in hosts["workers"] if worker["accepted"]}
    assert len(accepted) == 2, hosts["workers"]
    for row in _rows(repo, "sortd"):  # every row names the host and worker it ran on
        assert row["placement"]["host"] and row["placement"]["worker"] in accepted


def browser_on_dask(done: Done, repo: Path) -> None:
    run = _newest(repo)
    rows = _rows(repo, run.name)
    assert _statuses(rows) == {"pass": 2}, _statuses(rows)
    assert len({row["placement"]["try"] for row in rows}) == 1  # one round, whole on one worker
    assert "rows per host: " in done.stderr and "done: " in done.stderr


def measured_200_mib(done: Done, repo: Path) -> None:
    label = "peak memory (whole tree)"
    peak = next(line for line in done.stderr.splitlines() if label in line)
    assert float(peak.split(label)[1].split()[0]) >= 200, peak  # "  peak memory ... 207.3 MiB"
    assert "command ended with exit status 0" in done.stderr


def measured_table(done: Done, repo: Path) -> None:
    assert done.stdout == "1\n"  # the command's own stdout, untouched
    assert "  wall time " in done.stderr and "command ended with exit status 0" in done.stderr
    assert "wall_time_ns" not in done.stderr  # readable labels, not field names


def json_measure(done: Done, repo: Path) -> None:
    data = json.loads(done.stdout.splitlines()[-1])  # after the command's own stdout
    assert data["exit_status"] == 0 and data["wall_time_ns"]["status"] == "complete"


def plan_lines(done: Done, repo: Path) -> None:
    assert f"{planned(repo)} attempts in" in done.stdout + done.stderr


def plan_presorted(done: Done, repo: Path) -> None:
    keys = [line.split()[0] for line in done.stdout.splitlines()[:-1]]
    assert keys and all(key.startswith(f"{PRESORTED}/") for key in keys), keys[:3]
    assert f"{planned(repo, PRESORTED)} attempts in" in done.stdout


def plan_json_head(done: Done, repo: Path) -> None:
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and all(json.loads(line)["key"] for line in lines)


def reports_written(*names: str) -> Check:
    def check(done: Done, repo: Path) -> None:
        for line in done.stdout.splitlines():
            assert Path(line.split()[-1]).is_file(), line
        written = {Path(line.split()[-1]).name for line in done.stdout.splitlines()}
        assert set(names) <= written, written
        for name in names:
            mode = (Path(done.stdout.split(name)[0].split()[-1]) / name).stat().st_mode
            assert mode & 0o777 == 0o644, (name, oct(mode))

    return check


def browser_run(run: str | None, statuses: set[str], attempts: int) -> Check:
    def check(done: Done, repo: Path) -> None:
        rows = _rows(repo, run) if run else _rows(repo, _newest(repo).name)
        assert len(rows) == attempts, _statuses(rows)
        assert set(_statuses(rows)) <= statuses, _statuses(rows)
        assert "done: " in done.stderr

    return check


def doctor_ready(done: Done, repo: Path) -> None:
    assert "chrome" in done.stdout and "ready" in done.stdout


def doctor_json_chrome(done: Done, repo: Path) -> None:
    (report,) = json.loads(done.stdout)
    assert report["engine"] == "chrome" and report["ready"] is True


def foreign_look(done: Done, repo: Path) -> None:
    assert "foreign CPU: " in done.stdout and "over a 1 s look" in done.stdout


def host_doctor(done: Done, repo: Path) -> None:
    assert "cgroup" in done.stdout + done.stderr


def host_doctor_json(done: Done, repo: Path) -> None:
    report = json.loads(done.stdout)
    assert "accounting" in report
    steady = report["cpu_steadiness"]  # the probe runs by default: a figure per usable CPU
    assert set(steady["cpus"]) == {str(c) for c in os.sched_getaffinity(0)}
    assert steady["log_sd"] > 0 and steady["pairs_needed"]["20%"] >= 2


def doctor_bare(done: Done, repo: Path) -> None:
    assert "cgroup layout:" in done.stdout and "accounting backend:" in done.stdout
    assert "CPU steadiness" not in done.stdout and "foreign CPU" not in done.stdout
    assert "driver paths:" not in done.stdout and "engine " not in done.stdout


def listing(done: Done, repo: Path) -> None:
    assert "l1.raw_cdp" in done.stdout and "chrome" in done.stdout


def ops_matrix(done: Done, repo: Path) -> None:
    """issue #25: the 52 ops x 9 paths, every cell implemented or refused, >= 90% implemented."""
    last = [line for line in done.stdout.splitlines() if "cells implemented" in line][0]
    implemented, total = (int(word) for word in last.split()[0:3:2])
    assert total == 52 * 9 and implemented >= 0.9 * total
    assert "unsupported op: route_fulfill (selenium cannot" in done.stdout


def ops_one_path(done: Done, repo: Path) -> None:
    lines = done.stdout.splitlines()
    assert len(lines) == 52 and any(
        "REFUSED: unsupported op: route_abort" in line for line in lines
    )


def corpus_listing(done: Done, repo: Path) -> None:
    assert "l1.raw_cdp" in done.stdout and "l1.agent_browser_tool" in done.stdout
    # issue #15: every subset of the corpus runs, each driver path listed found or missing
    assert "driver paths:" in done.stdout and "0 not run yet, 0 invalid" in done.stdout


def scenarios_matched(done: Done, repo: Path) -> None:
    assert " 0 differences" in done.stdout and "generated files match" in done.stdout


def scenarios_json(done: Done, repo: Path) -> None:
    data = json.loads(done.stdout)
    assert data["differences"] == [] and data["matched"] > 0


def listing_json(corpus: str) -> Check:
    def check(done: Done, repo: Path) -> None:
        data = json.loads(done.stdout)
        assert data["corpus"].endswith(corpus) and data["subsets"], data["corpus"]

    return check


def resumed_nothing_left(done: Done, repo: Path) -> None:
    assert "0 of 12 attempts to run" in done.stderr


def resumed_compute(done: Done, repo: Path) -> None:
    assert f"{planned(repo, PRESORTED)} already done" in done.stdout


def quiet_in_example_dir(done: Done, repo: Path) -> None:
    run = _newest(repo, "examples/sorting/runs")
    assert done.stdout.strip() == f"run directory: {run}"
    rows = (run / "results.jsonl").read_text().splitlines()
    assert len(rows) == planned(repo, PRESORTED)
    assert all(json.loads(r)["status"] == "accepted" for r in rows)


def profiled_run(done: Done, repo: Path) -> None:
    assert (repo / "runs" / "prof1" / "resource_summary.json").is_file()
    assert "cannot be eligible" in done.stderr  # k=1 and one task: warned up front


def interleaved_run(done: Done, repo: Path) -> None:
    rows = _rows(repo, "ilv1")
    twins = [r for r in rows if r.get("calibration_twin") is True]
    assert len(rows) == 8 and len(twins) == 4, _statuses(rows)
    summary = json.loads((repo / "runs" / "ilv1" / "resource_summary.json").read_text())
    observer = summary["observer_effect"]
    assert observer["calibration_mode"] == "interleaved"
    # each engine's first pair holds its fresh process's first attempt: one pair each is figured
    assert observer["pairs_first_on_launch"] == 2 and observer["matched_attempts"] == 2
    card = (repo / "runs" / "ilv1" / "resource-card.md").read_text()
    assert "Observer effect from interleaved pairs in this run" in card


def csv_export(done: Done, repo: Path) -> None:
    lines = (repo / "results.csv").read_text().splitlines()
    assert lines[0].startswith("key,status,attempt") and len(lines) == planned(repo, PRESORTED) + 1


def json_export(done: Done, repo: Path) -> None:
    assert len(json.loads(done.stdout)) == planned(repo, PRESORTED)


def inspect_text(done: Done, repo: Path) -> None:
    assert "key: L1/l1.raw_cdp/own_ax_tree/chrome/1" in done.stdout


def inspect_json(done: Done, repo: Path) -> None:
    assert json.loads(done.stdout)["key"] == "L1/l1.raw_cdp/own_ax_tree/lightpanda/1"


def inspect_compute(done: Done, repo: Path) -> None:
    """Issue #30: a compute attempt by readable selectors; fields it lacks are not shown."""
    assert "implementation: c-mergesort" in done.stdout and "status: accepted" in done.stdout
    assert "repetition: 1" in done.stdout and "None" not in done.stdout


def status_text(done: Done, repo: Path) -> None:
    assert "state     complete" in done.stdout
    assert f"accepted     {planned(repo, PRESORTED)}" in done.stdout


def status_json(done: Done, repo: Path) -> None:
    data = json.loads(done.stdout)
    assert data["run_id"] == "sort1" and data["state"] == "complete"
    assert data["rows"] == planned(repo, PRESORTED)


def clean_text(done: Done, repo: Path) -> None:
    assert "killed 0 process(es), removed 0 group(s) and 0 temporary dir(s)" in done.stdout


def clean_json(done: Done, repo: Path) -> None:
    report = json.loads(done.stdout)  # a finished run: nothing left to remove
    assert report["killed"] == [] and report["groups_removed"] == []


def clean_all(done: Done, repo: Path) -> None:
    assert "sort1: killed 0 process(es)" in done.stdout


def clean_orphans(done: Done, repo: Path) -> None:
    assert re.match(r"removed \d+ orphan group\(s\)", done.stdout)


def status_latest(done: Done, repo: Path) -> None:
    assert f"run       {_newest(repo).name}" in done.stdout


def schema_list(done: Done, repo: Path) -> None:
    assert "measurements-v2" in done.stdout.split()


def schema_doc(done: Done, repo: Path) -> None:
    assert isinstance(json.loads(done.stdout), dict)


def compute_demo(done: Done, repo: Path) -> None:
    assert "report.html" in done.stdout
    assert not [line for line in done.stderr.splitlines() if line.startswith("failed:")]


def full_demo(done: Done, repo: Path) -> None:
    """It ends with a verdict per suite, each naming its reports, then its own wall time."""
    tail = done.stdout.split("== verdict", 1)[1]
    assert "verdict: compute example sorting" in tail and "verdict: browser engines" in tail
    for label in ("question:", "answer:", "eligible:", "failures:"):
        assert tail.count(f"  {label}") >= 2, (label, tail[-3000:])
    reports = [line.split()[-1] for line in tail.splitlines() if line.startswith("  report:")]
    assert len(reports) >= 2 and all(Path(p).is_file() for p in reports), tail[-3000:]
    assert done.stdout.rstrip().splitlines()[-1].startswith("demo took ")


def examples_listed(done: Done, repo: Path) -> None:
    lines = done.stdout.splitlines()
    names = [line.split(":")[0] for line in lines[::2]]
    assert "sorting" in names and all(Path(m.strip()).is_file() for m in lines[1::2]), lines


def examples_copied(done: Done, repo: Path) -> None:
    assert (repo / "my-examples" / "sorting" / "metewand.toml").is_file()
    assert "metewand run my-examples/sorting/metewand.toml" in done.stdout


def measured_series(done: Done, repo: Path) -> None:
    assert "Relative to command 1 (sleep 0.05)" in done.stdout and "sleep 0.1" in done.stdout


def measured_parameters(done: Done, repo: Path) -> None:
    assert "sleep 0.01" in done.stdout and "sleep 0.02" in done.stdout


def measured_exports(done: Done, repo: Path) -> None:
    lines = (repo / "runs.csv").read_text().splitlines()
    assert lines[0].startswith("command,runs,") and lines[1].startswith("true,5,"), lines[:2]
    assert json.loads((repo / "runs.json").read_text())


def measured_names(done: Done, repo: Path) -> None:
    """Named, interleaved, with the paired ratio of the second against the first."""
    assert "Command 1: grep  (grep -r measure src)" in done.stdout
    assert "Command 2: rg  (grep -rF measure src)" in done.stdout
    assert "paired per round (12 interleaved rounds" in done.stdout and " ms [" in done.stdout


def measured_helpers(done: Done, repo: Path) -> None:
    assert "Command 1: touch scratch/x" in done.stdout and not (repo / "scratch").exists()


def measured_pretty(done: Done, repo: Path) -> None:
    result = json.loads(done.stdout)
    assert len(done.stdout.splitlines()) > 20 and len(result["commands"][0]["runs"]) == 3


def measured_sequential(done: Done, repo: Path) -> None:
    assert "the commands ran one after the other" in done.stdout and " µs [" in done.stdout


def measured_marks(done: Done, repo: Path) -> None:
    """Both phases of the documented --mark-fifo example are shown; the FIFO it made is gone."""
    assert "phases (2 marks):" in done.stderr, done.stderr
    assert "  a: wall " in done.stderr and "  b: wall " in done.stderr
    assert not (repo / "marks.fifo").exists()


def compared(base: str, new: str) -> Check:
    """The headline names both runs, and every group of the example is comparable."""

    def check(done: Done, repo: Path) -> None:
        text = " ".join(done.stdout.split())  # rich wraps the headline at 80 columns
        assert f"compute runs {base} (BASE) vs {new} (NEW)" in text, text[:400]
        assert "0 not comparable; 0 status changes" in text, text[:400]

    return check


def gate_consistent(*written: str) -> Check:
    """--fail-on-regression on two separate runs on wall time: 2 when a run's host was polluted
    (naming the gate's conditions); else either verdict may be right, but 1 must come with the
    regression named and 0 without one."""

    def check(done: Done, repo: Path) -> None:
        if done.returncode == 2:
            assert "refuses to judge wall time" in done.stderr, done.stderr[-2000:]
            assert "pollution gate failed for:" in done.stderr
        else:
            assert (done.returncode == 1) == ("regression:" in done.stdout), done.stdout[-2000:]
        for name in written:
            assert (repo / name).is_file(), name

    return check


def sorting_ab(done: Done, repo: Path) -> None:
    """The A/B run holds every planned attempt twice, one row per side, paired."""
    rows = _rows(repo, "ab")
    assert _statuses(rows) == {"accepted": 2 * planned(repo)}
    sides = {(row["ab"]["pair"], row["ab"]["side"]) for row in rows}
    assert len(sides) == len(rows) and {side for _, side in sides} == {"base", "new"}
    manifest = json.loads((repo / "runs" / "ab" / "run_manifest.json").read_text())
    assert manifest["data"]["ab"]["baseline_tree"] == str(repo / "examples" / "sorting")


def ab_gate_passes(done: Done, repo: Path) -> None:
    """The README's CI recipe on unchanged code: every group judged, none slower."""
    text = " ".join(done.stdout.split())
    assert "interleaved A/B run ab" in text and "0 slower" in text, text[:600]
    assert "0 not comparable" in text, text[:600]


def several_runs_a_side(done: Done, repo: Path) -> None:
    text = " ".join(done.stdout.split())
    assert "runs sort1, sort2 (BASE) vs sort3, sortd (NEW)" in text, text[:600]
    # two runs a side: runs are the units, two of them
    assert "3 groups not comparable, not counted by the gate: n=2 < 5 (x3)" in text


def engines_paired(done: Done, repo: Path) -> None:
    text = " ".join(done.stdout.split())
    assert "engines of run base1 (lightpanda / chrome)" in text, text[:600]


def files_written(*names: str) -> Check:
    def check(done: Done, repo: Path) -> None:
        assert "(BASE) vs" in done.stdout
        for name in names:
            assert (repo / name).stat().st_size > 0, name

    return check


def suite_passes(done: Done, repo: Path) -> None:
    assert " passed" in done.stdout


def remembered(run: str) -> Check:
    """The run is complete and added itself to history.duckdb beside runs/."""

    def check(done: Done, repo: Path) -> None:
        sorting_accepts_all(done, repo)
        assert f"history: added {run} " in done.stderr, done.stderr[-1000:]
        assert (repo / "history.duckdb").is_file()

    return check


def explains(dialect: str) -> Check:
    def check(done: Done, repo: Path) -> None:
        assert f"dialect: {dialect} (" in done.stdout
        assert "runnable here: yes" in done.stdout

    return check


def history_unchanged(*runs: str) -> Check:
    """Runs that added themselves at their end are already there: adding them changes nothing."""

    def check(done: Done, repo: Path) -> None:
        for run in runs:
            assert f"unchanged: {run} (compute" in done.stdout, done.stdout

    return check


def history_checked(done: Done, repo: Path) -> None:
    """Either verdict may be right on real runs, but 1 comes with the step named, 0 without."""
    assert (done.returncode == 1) == ("check failed" in done.stderr), done.stderr
    assert "compute: cpu_time_ns" in done.stdout, done.stdout
    assert "groups analysed" in done.stdout


def history_listed(*runs: str) -> Check:
    def check(done: Done, repo: Path) -> None:
        for run in runs:
            assert f" {run} " in done.stdout, done.stdout

    return check


def history_shown(done: Done, repo: Path) -> None:
    assert "compute: cpu_time_ns per run" in " ".join(done.stdout.split()), done.stdout[:600]


def history_site(done: Done, repo: Path) -> None:
    for name in ("index.html", "compute.html"):
        assert (repo / "history-site" / name).stat().st_size > 0, name
    assert (repo / "history-site" / "compute.html").read_text().count('class="chart"') >= 5


def history_exported(done: Done, repo: Path) -> None:
    assert list((repo / "history-parquet" / "attempt_values").rglob("*.parquet"))
    assert (repo / "history-parquet" / "meta.parquet").is_file()


def history_reimported(done: Done, repo: Path) -> None:
    # its own export merged back: every run already there, nothing added or replaced
    assert re.search(r"imported: 0 runs added, 0 replaced, [1-9]\d* unchanged", done.stdout), (
        done.stdout
    )


def reference_cases_pass(done: Done, repo: Path) -> None:
    assert "sum case 0: ok: metrics as expected" in done.stdout


def conformance_table(done: Done, repo: Path) -> None:
    lines = done.stdout.splitlines()
    assert lines[0] == "| family | vectors | same | different |"
    families = [line for line in lines[2:] if line.startswith("| ")]
    assert len(families) >= 9 and all(line.endswith("| — |") for line in families), families


@dataclass(frozen=True)
class Expect:
    command: str  # as documented, with metewand spelled `metewand`
    code: int | tuple[int, ...]  # a tuple: any of these (e.g. a regression gate's verdict)
    check: Check
    long: bool = False  # only with METEWAND_LONG_EXAMPLES=1
    corpus: bool = False  # needs ../shared/corpus/lexbench
    timeout_s: int = 300  # pytest-timeout's limit for the command (a long example: 3600)


SORT = "metewand run examples/sorting/metewand.toml"
LEX = "--tasks ../shared/corpus/lexbench --subset l1.raw_cdp --tag purpose.smoke"
TASK = "--engines chrome,lightpanda --task own_ax_tree"
EXPECTED: tuple[Expect, ...] = (
    Expect('metewand measure -- python3 -c "x = bytearray(200 << 20)"', 0, measured_200_mib),
    Expect("metewand measure --json --backend proc -- sh -c 'sleep 0.2'", 0, json_measure),
    Expect('metewand measure -- python3 -c "print(1)"', 0, measured_table),
    Expect('metewand measure --json -- python3 -c "print(1)"', 0, json_measure),
    Expect(
        "metewand measure --runs 10 --warmup 2 -- 'sleep 0.05' -- 'sleep 0.1'", 0, measured_series
    ),
    Expect(
        "metewand measure --runs 5 --parameter-list n 1,2 -- 'sleep 0.0{n}'", 0, measured_parameters
    ),
    Expect(
        "metewand measure --runs 12 --command-name grep --command-name rg --time-unit millisecond "
        "-- 'grep -r measure src' -- 'grep -rF measure src'",
        0,
        measured_names,
    ),
    Expect(
        "metewand measure --runs 6 --setup 'mkdir -p scratch' --prepare 'rm -f scratch/x' "
        "--cleanup 'rm -r scratch' -- 'touch scratch/x'",
        0,
        measured_helpers,
    ),
    Expect("metewand measure --runs 3 --json --pretty -- true", 0, measured_pretty),
    Expect(
        "metewand measure --runs 8 --no-interleave --time-unit microsecond -- true -- /bin/true",
        0,
        measured_sequential,
    ),
    Expect(
        "metewand measure --runs 5 --export-json runs.json --export-csv runs.csv -- true",
        0,
        measured_exports,
    ),
    Expect(
        "metewand measure --mark-fifo marks.fifo -- sh -c 'echo a > marks.fifo; echo b > marks.fifo'",
        0,
        measured_marks,
    ),
    Expect("metewand plan examples/sorting/metewand.toml", 0, plan_lines),
    Expect("metewand plan examples/sorting/metewand.toml --explain", 0, explains("metewand")),
    Expect(
        "metewand plan examples/sorting/metewand.toml --experiment presorted", 0, plan_presorted
    ),
    Expect("metewand plan examples/rust-dialect/metewand.toml --explain", 0, explains("rust")),
    Expect("metewand reference-cases examples/rust-dialect/metewand.toml", 0, reference_cases_pass),
    Expect(
        "metewand reference-cases examples/rust-dialect/metewand.toml --problem sum",
        0,
        reference_cases_pass,
    ),
    Expect("metewand conformance", 0, conformance_table),
    Expect("metewand conformance --no-runs", 0, conformance_table),
    Expect("metewand conformance --no-runs --details", 0, conformance_table),
    Expect("metewand plan examples/sorting/metewand.toml --json | head -3", 0, plan_json_head),
    Expect(SORT, 0, sorting_accepts_all),
    Expect("metewand report latest", 0, reports_written("scorecard.md", "report.html")),
    Expect(
        "metewand report latest --reference-implementation python-builtin",
        0,
        reports_written("report.html", "cases.csv"),
    ),
    Expect(f"{SORT} --experiment presorted --jobs 2 --run-id sort1", 0, presorted_accepts_all),
    Expect("metewand report latest --format md,json", 0, reports_written("scores.json")),
    Expect("metewand run --resume sort1", 0, resumed_compute),
    Expect(f"{SORT} --experiment presorted --run-id sort2 --no-progress", 0, presorted_accepts_all),
    Expect(
        f"{SORT} --experiment presorted --run-id sort3 --no-phase-marks", 0, sorting_without_marks
    ),
    Expect(
        f"{SORT} --experiment presorted --executor dask --dask-local 2 --run-id sortd",
        0,
        sorting_on_dask,
    ),
    Expect("metewand compare sort1 sort2", 0, compared("sort1", "sort2")),
    Expect(
        "metewand compare runs/sort1 runs/sort2 --fail-on-regression --threshold 5%",
        (0, 1, 2),
        gate_consistent(),
    ),
    Expect(
        "metewand compare --base sort1 --base sort2 --new sort3 --new sortd",
        0,
        several_runs_a_side,
    ),
    Expect(
        "metewand compare sort1 sort2 --metric cpu_time_ns --format md,json,html --out cmp",
        0,
        files_written("cmp/compare.md", "cmp/compare.json", "cmp/compare.html"),
    ),
    Expect(
        "metewand report sort1 --reference-implementation python-builtin",
        0,
        reports_written("report.html", "cases.csv"),
    ),
    Expect(f"{SORT} --run-id base --no-progress", 0, sorting_accepts_all),
    Expect(f"{SORT} --run-id new --no-progress", 0, sorting_accepts_all),
    Expect("metewand compare base new", 0, compared("base", "new")),
    Expect(
        "metewand compare runs/base runs/new --fail-on-regression --threshold 5% --format "
        "md,json,html",
        (0, 1, 2),
        gate_consistent("compare.md", "compare.json", "compare.html"),
    ),
    Expect(  # every attempt twice: 540 of them (240 at 8 repetitions took 5.5 min at load 20)
        f"{SORT} --ab-baseline examples/sorting --run-id ab --no-progress",
        0,
        sorting_ab,
        timeout_s=900,
    ),
    Expect("metewand compare --ab ab --metric cpu_time_ns --fail-on-regression", 0, ab_gate_passes),
    Expect(f"{SORT} --run-id ci1 --no-progress", 0, remembered("ci1")),
    Expect("metewand history add runs/base runs/new", 0, history_unchanged("base", "new")),
    Expect("metewand history check --fail-on-change", (0, 1), history_checked),
    Expect("metewand history list", 0, history_listed("base", "new", "ci1")),
    Expect("metewand history show --implementation python-heapsort --last 10", 0, history_shown),
    Expect("metewand history report --out history-site", 0, history_site),
    Expect("metewand history export --parquet history-parquet", 0, history_exported),
    Expect("metewand history import --parquet history-parquet", 0, history_reimported),
    Expect(
        "cd examples/sorting && metewand run --quiet --experiment presorted",
        0,
        quiet_in_example_dir,
    ),
    Expect("metewand status runs/sort1", 0, status_text),
    Expect("metewand status sort1 --json", 0, status_json),
    Expect("metewand status latest", 0, status_latest),
    Expect("metewand clean runs/sort1", 0, clean_text),
    Expect("metewand clean sort1 --json", 0, clean_json),
    Expect("metewand clean", 0, clean_all),
    Expect("metewand clean --orphans", 0, clean_orphans),
    Expect("metewand export runs/sort1 --format csv -o results.csv", 0, csv_export),
    Expect("metewand export sort1 --format json", 0, json_export),
    Expect("metewand report runs/sort1", 0, reports_written("report.html", "results.csv")),
    Expect("metewand schema", 0, schema_list),
    Expect("metewand schema measurements-v2", 0, schema_doc),
    Expect("metewand schema attempt --json", 0, schema_doc),
    Expect("metewand doctor", 0, host_doctor),
    Expect("metewand doctor --json --engines chrome", 0, host_doctor_json),
    Expect("metewand doctor --engines '' --foreign-look-s 1", 0, foreign_look),
    Expect(
        "metewand doctor --engines '' --no-drivers --foreign-look-s 0 --no-cpu-probe",
        0,
        doctor_bare,
    ),
    Expect("metewand browser doctor --engines chrome --foreign-look-s 1", 0, foreign_look),
    Expect("metewand browser doctor", 0, doctor_ready),
    Expect("metewand browser doctor --engines chrome --json", 0, doctor_json_chrome),
    Expect("metewand browser list", 0, listing),
    Expect("metewand browser ops", 0, ops_matrix),
    Expect("metewand browser ops --path selenium", 0, ops_one_path),
    Expect("metewand browser list --json", 0, listing_json("browser_suite")),
    Expect(
        "metewand browser list --tasks ../shared/corpus/lexbench", 0, corpus_listing, corpus=True
    ),
    Expect(
        "metewand browser list --tasks ../shared/corpus/lexbench --json",
        0,
        listing_json("corpus/lexbench"),
        corpus=True,
    ),
    Expect(
        "metewand browser scenarios --check --tasks ../shared/corpus/lexbench",
        0,
        scenarios_matched,
        corpus=True,
    ),
    Expect(
        "metewand browser scenarios --check --tasks ../shared/corpus/lexbench --json",
        0,
        scenarios_json,
        corpus=True,
    ),
    Expect(
        "metewand browser run --engines chrome,lightpanda --k 1",
        0,
        browser_run(None, {"pass", "fail"}, 58),
    ),
    Expect(
        f"metewand browser run {LEX} --engines chrome,lightpanda --k 1",
        0,
        browser_run(None, {"pass", "fail"}, 8),
        corpus=True,
    ),
    Expect(
        f"metewand browser run {LEX} --engines chrome --k 3 --jobs 2 --run-id lex1",
        0,
        browser_run("lex1", {"pass", "fail"}, 12),
        corpus=True,
    ),
    Expect(
        "metewand browser run --resume lex1 --no-progress", 0, resumed_nothing_left, corpus=True
    ),
    Expect(
        "metewand browser run --engines chrome,lightpanda --k 3 --seed 7 --tag purpose.negative",
        0,
        browser_run(None, {"pass", "fail"}, 6),
    ),
    Expect(
        f"metewand browser run {TASK} --resource-profile baseline --run-id base1",
        0,
        browser_run("base1", {"pass"}, 2),
    ),
    Expect(
        f"metewand browser run {TASK} --resource-profile engine "
        "--resource-calibration-baseline base1 --reference-engine chrome --run-id prof1",
        0,
        profiled_run,
    ),
    Expect(
        f"metewand browser run {TASK} --k 2 --resource-profile engine "
        "--resource-calibration interleaved --run-id ilv1",
        0,
        interleaved_run,
    ),
    Expect(
        "metewand browser run --engines chrome --task own_ax_tree --fail-on fail,timeout",
        0,
        browser_run(None, {"pass"}, 1),
    ),
    Expect(
        "metewand browser run --engines chrome,lightpanda --task own_ax_tree --executor dask "
        "--dask-local 2",
        0,
        browser_on_dask,
    ),
    Expect(
        "metewand report runs/prof1 --baseline runs/base1 --reference-engine chrome --format html",
        0,
        reports_written("report.html", "resource-card.md"),
    ),
    Expect("metewand compare --ab-engines chrome,lightpanda base1", 0, engines_paired),
    Expect(
        "metewand inspect runs/base1 --task own_ax_tree --engine chrome --attempt 1",
        0,
        inspect_text,
    ),
    Expect(
        "metewand inspect base1 --key L1/l1.raw_cdp/own_ax_tree/lightpanda/1 --json",
        0,
        inspect_json,
    ),
    Expect(
        "metewand inspect sort1 --implementation c-mergesort --case 'presorted: swaps=200' "
        "--repetition 1",
        0,
        inspect_compute,
    ),
    Expect("metewand demo --skip-browser", 0, compute_demo),
    Expect("metewand examples list", 0, examples_listed),
    Expect("metewand examples copy my-examples", 0, examples_copied),
    Expect("metewand plan my-examples/sorting/metewand.toml", 0, plan_lines),
    Expect("metewand demo", 0, full_demo, long=True),
    Expect("metewand demo --full", 0, full_demo, long=True),
    Expect("make demo", 0, full_demo, long=True),
    Expect("make test", 0, suite_passes, long=True),
)


def test_every_documented_command_has_an_expectation() -> None:
    documented = {normalized(c) for c in readme_commands()} | set(help_examples())
    missing = documented - {e.command for e in EXPECTED}
    assert not missing, f"documented but never run by this test: {sorted(missing)}"
    stale = {e.command for e in EXPECTED} - documented
    assert not stale, f"expected but no longer documented: {sorted(stale)}"


def _install_is_stale() -> bool:
    stamp = REPO_ROOT / ".venv" / ".installed"
    pyproject = REPO_ROOT / "pyproject.toml"
    return not stamp.exists() or stamp.stat().st_mtime < pyproject.stat().st_mtime


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("fresh-clone"))


def _literal(expect: Expect) -> str:
    """README's own spelling when README documents it (.venv/bin/metewand), else --help's."""
    for command in readme_commands():
        if normalized(command) == expect.command:
            return command
    return expect.command


CASES = [
    pytest.param(e, id=e.command[:70], marks=[pytest.mark.timeout(3600 if e.long else e.timeout_s)])
    for e in EXPECTED
]


@pytest.mark.parametrize("expect", CASES)
def test_documented_command(expect: Expect, repo: Path) -> None:
    if expect.long and not LONG:
        pytest.skip("long example: set METEWAND_LONG_EXAMPLES=1 to run it")
    if expect.corpus:
        lexbench_or_skip()
    if expect.command.startswith("make ") and _install_is_stale():
        pytest.fail(
            "`make install` first: the copy's make would reinstall the shared .venv "
            "from the temporary copy (its stamp is older than pyproject.toml)"
        )
    done = run_in(repo, _literal(expect), timeout=3600 if expect.long else 900)
    context = f"$ {_literal(expect)}\nstdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-3000:]}"
    codes = expect.code if isinstance(expect.code, tuple) else (expect.code,)
    assert done.returncode in codes, context
    assert "Traceback" not in done.stderr, context
    try:
        expect.check(done, repo)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{context}") from None
