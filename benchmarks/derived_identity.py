"""Are two runs of the same benchmark the same, modulo times, ids and durations? (#14 step 1)

Usage: derived_identity.py BEFORE_RUN AFTER_RUN [--keep DIR]

Both runs' derived files are regenerated into scratch directories with ``metewand report`` (the
one writer of scores.json, scorecard.md, results.csv / cases.csv), beside the derived files
``metewand browser run`` leaves in the run directory (scores.json; a profiled run's
resource_summary.json and resource-card.md) and host_summary.json. Each file is then normalised and compared:

- run ids, paths of the two runs, timestamps, hex digests and durations are masked;
- every number with a fractional part (a measured value) becomes ``<num>``; integers stay
  (counts: attempts, passes, rows), except under keys that name a measurement and, in text,
  integers of four digits or more (nanoseconds, bytes);
- what the host pollution gate says about other processes on the machine (how many samples were
  over, which processes) is masked: it depends on the machine's load, not on metewand;
- JSON is compared as data (keys, value types, masked values), text line by line, CSV lines
  sorted (a row's place follows the seeded order, which hashes the source tree).

Beyond the derived files: the per-key status (and failure code) of every row, every row's field
paths (its keys, nested, list items taken together: the layout the peer's readers rely on), the
manifest's key set (top level and ``data``), and the list of files in the run directory. Exit 0 when every
comparison holds, 1 when one differs (each difference is printed), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
METEWAND = ROOT / ".venv" / "bin" / "metewand"
RUN_FILES = ("scores.json", "resource_summary.json", "resource-card.md", "host_summary.json")
REPORT_FORMATS = "md,json,csv"
# keys whose integer values are measurements (they vary between two runs of one benchmark)
MEASURED_KEY = re.compile(
    r"(_ns|_ms|_s|_bytes|_kib|_kb|_pct|_ratio|time|wall|cpu|rss|pss|duration|elapsed|pid|"
    r"port|generation|seed_offset|samples|count_over|sample|load|avg|max|min|median|mean|"
    r"p\d+|ci|bytes|ticks|_at|uptime|swap|mem|pressure|foreign|width|ms$|"
    # CDP commands an attempt sent: wait steps poll, so the count follows timing (two runs of
    # the same code differ by one on ~15% of the built-in suite's rows)
    r"cdp\.commands|cdp_call_count|cdp\.events|^commands$|^events$|"
    # a measurement form's value, the engine's process counts (helpers come and go), and how
    # often the settle wait looked at the engine before it was quiet
    r"^value$|process_count|processes|looks|"
    # a fitted line's coefficients (the leak curve) are measurements too
    r"intercept|slope)",
    re.IGNORECASE,
)
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# private temporary dirs (an engine's profile) and ports are drawn anew by every launch
TEMP_DIR = re.compile(re.escape(tempfile.gettempdir()) + r"/metewand-[\w-]+?-[a-z0-9_]{8}\b")
PORT = re.compile(r"(127\.0\.0\.1|localhost|port[= ])[:=]?\d+")
HEX = re.compile(r"\b([0-9a-f]{12,64}|[0-9A-F]{16,64})\b")
# identities in attempt keys (``integers@7aa3f6f092``) hash the source tree, so they differ
# between two versions of metewand, and with them the seeded execution order
KEY_ID = re.compile(r"@[0-9a-f]{10}\b")
DECIMAL = re.compile(r"(?<![\w.])-?\d{1,3}(,\d{3})+(\.\d+)?|(?<![\w.])-?\d+\.\d+(e[+-]?\d+)?")
HOST_NOISE_KEYS = frozenset(
    {"top_foreign", "samples_over", "consecutive_over", "worst", "started_during_run"}
)
# a measured integer in text (ns, bytes, ms: four digits or more); counts stay
WITH_UNIT = re.compile(r"(?<![\w.])-?\d+ ?(ms|s|ns|MiB|KiB|GiB|B|%)(?!\w)")
LONG_INT = re.compile(r"(?<![\w.@/-])-?\d{4,}(?![\w.])")
# what the host pollution gate says depends on what else ran on the machine, not on metewand
HOST_NOISE = (
    (re.compile(r"for \d+ consecutive samples"), "for <n> consecutive samples"),
    (re.compile(r"top foreign while over: [^|\n\"]*"), "top foreign while over: <processes>"),
    # which calibration limits a measured overhead crossed follows the measurement
    (re.compile(r"calibration failed: [^|\n\"]*"), "calibration failed: <limits crossed>"),
)


RUN_ID_KEY = "<run_id>"


def _text(value: str, names: dict[str, str]) -> str:
    run_id = names[RUN_ID_KEY]
    for raw, mask in names.items():
        if raw != RUN_ID_KEY:
            value = value.replace(raw, mask)
    value = re.sub(
        rf"(?<=/){re.escape(run_id)}(?=/|$)|(?<=^# Scorecard: run ){re.escape(run_id)}$"
        rf"|(?<=^# Resource card: ){re.escape(run_id)}$",
        RUN_ID_KEY,
        value,
    )
    value = TIMESTAMP.sub("<time>", value)
    value = UUID.sub("<uuid>", value)
    value = TEMP_DIR.sub("<tmp>", value)
    value = PORT.sub(lambda m: f"{m.group(1)}<port>", value)
    value = HEX.sub("<hex>", value)
    value = KEY_ID.sub("@<id>", value)
    for pattern, mask in HOST_NOISE:
        value = pattern.sub(mask, value)
    value = DECIMAL.sub("<num>", value)
    value = WITH_UNIT.sub(lambda m: f"<num> {m.group(1)}", value)
    return LONG_INT.sub("<num>", value)


def _data(value: Any, names: dict[str, str], key: str = "") -> Any:
    if key == "run_id" and value == names[RUN_ID_KEY]:
        return RUN_ID_KEY
    if key in HOST_NOISE_KEYS:
        return "<host noise>"
    if isinstance(value, dict):
        return {_text(k, names): _data(v, names, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_data(v, names, key) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, float):
        return "<num>"
    if isinstance(value, int):
        return "<num>" if MEASURED_KEY.search(key) else value
    if isinstance(value, str):
        return _text(value, names)
    return value


def normalised(path: Path, names: dict[str, str]) -> Any:
    if path.suffix == ".json":
        return _data(json.loads(path.read_bytes()), names)
    if path.suffix == ".csv":
        return _csv(path, names)
    return [_text(line, names) for line in path.read_text().splitlines()]


def _cell(column: str, measured: bool, cell: str, names: dict[str, str]) -> str:
    if measured and cell:
        return "<num>"
    if column.endswith("run_id") and cell == names[RUN_ID_KEY]:
        return RUN_ID_KEY
    return _text(cell, names)


def _csv(path: Path, names: dict[str, str]) -> list[list[str]]:
    """Header, then the rows sorted (their place follows the seeded order, which hashes the
    source tree); a column named for a measurement is masked."""
    with open(path, newline="") as fh:
        header, *rows = list(csv.reader(fh))
    measured = [bool(MEASURED_KEY.search(column)) for column in header]
    masked = [
        [_cell(col, m, cell, names) for col, m, cell in zip(header, measured, row, strict=False)]
        for row in rows
    ]
    return [header, *sorted(masked)]


def _report(run_dir: Path, out: Path) -> None:
    out.mkdir(parents=True)
    subprocess.run(
        [str(METEWAND), "report", str(run_dir), "--format", REPORT_FORMATS, "--out", str(out)],
        check=True,
        capture_output=True,
    )


def _rows(run_dir: Path) -> list[tuple[str, Any, Any]]:
    """(key with its ids masked, status, failure code) of every row, sorted."""
    statuses = []
    for line in (run_dir / "results.jsonl").read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            code = row.get("code") or row.get("failure_class")
            statuses.append((KEY_ID.sub("@<id>", row["key"]), row.get("status"), code))
    return sorted(statuses, key=str)


def _field_paths(value: Any, prefix: str = "") -> set[str]:
    paths: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            paths |= {f"{prefix}/{key}", *_field_paths(item, f"{prefix}/{key}")}
    elif isinstance(value, list):
        for item in value:
            paths |= _field_paths(item, f"{prefix}[]")
    return paths


def _row_fields(run_dir: Path) -> dict[str, list[str]]:
    """Each row's field paths, by key (ids masked)."""
    rows = (
        json.loads(line)
        for line in (run_dir / "results.jsonl").read_text().splitlines()
        if line.strip()
    )
    return {KEY_ID.sub("@<id>", row["key"]): sorted(_field_paths(row)) for row in rows}


def _manifest_keys(run_dir: Path) -> tuple[list[str], list[str]]:
    manifest = json.loads((run_dir / "run_manifest.json").read_bytes())
    return sorted(manifest), sorted(manifest.get("data", {}))


def _listing(run_dir: Path) -> list[str]:
    return sorted(p.name for p in run_dir.iterdir())


def _names(run_dir: Path) -> dict[str, str]:
    """The run's directory (as a substring) and its id: a short id (``before``) can also be an
    ordinary word, so it is masked where it stands alone as a value, a path part or a title."""
    manifest = json.loads((run_dir / "run_manifest.json").read_bytes())
    return {
        str(run_dir.resolve()): "<run_dir>",
        str(run_dir): "<run_dir>",
        RUN_ID_KEY: str(manifest["run_id"]),
    }


def compare(before: Path, after: Path, scratch: Path) -> list[str]:
    differences: list[str] = []
    _report(before, scratch / "before")
    _report(after, scratch / "after")
    names_b, names_a = _names(before), _names(after)
    pairs: dict[str, tuple[Path | None, Path | None]] = {}
    for name in sorted(
        {p.name for p in (scratch / "before").iterdir()}
        | {p.name for p in (scratch / "after").iterdir()}
    ):
        b, a = scratch / "before" / name, scratch / "after" / name
        pairs[f"report/{name}"] = (b if b.exists() else None, a if a.exists() else None)
    for name in RUN_FILES:
        b, a = before / name, after / name
        if b.exists() or a.exists():
            pairs[f"run/{name}"] = (b if b.exists() else None, a if a.exists() else None)
    for label, (b, a) in pairs.items():
        if b is None or a is None:
            differences.append(f"{label}: only in {'after' if b is None else 'before'}")
            continue
        nb, na = normalised(b, names_b), normalised(a, names_a)
        if nb != na:
            differences.append(f"{label}: differs\n{_first_difference(nb, na)}")
        else:
            print(f"same: {label}")
    checks = {
        "row statuses per key": (_rows(before), _rows(after)),
        "row field paths per key": (_row_fields(before), _row_fields(after)),
        "manifest keys (top level, data)": (_manifest_keys(before), _manifest_keys(after)),
        "files in the run directory": (_listing(before), _listing(after)),
    }
    for label, (b_value, a_value) in checks.items():
        if b_value != a_value:
            differences.append(f"{label}: differs\n{_first_difference(b_value, a_value)}")
        else:
            print(f"same: {label}")
    return differences


def _first_difference(before: Any, after: Any, where: str = "") -> str:
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after), key=str):
            if before.get(key) != after.get(key):
                return _first_difference(before.get(key), after.get(key), f"{where}/{key}")
    if isinstance(before, list) and isinstance(after, list):
        for index, (b, a) in enumerate(zip(before, after, strict=False)):
            if b != a:
                return _first_difference(b, a, f"{where}[{index}]")
        if len(before) != len(after):
            return f"  at {where}: {len(before)} items before, {len(after)} after"
    return f"  at {where or '/'}: before {str(before)[:300]!r}\n  {' ' * len(where)}   after  {str(after)[:300]!r}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--keep", type=Path, help="write the regenerated reports here")
    args = parser.parse_args(argv)
    for run_dir in (args.before, args.after):
        if not (run_dir / "run_manifest.json").is_file():
            print(f"error: {run_dir}: not a run directory (no run_manifest.json)", file=sys.stderr)
            return 2
    if args.keep is not None:
        differences = compare(args.before, args.after, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="metewand-identity-") as scratch:
            differences = compare(args.before, args.after, Path(scratch))
    for difference in differences:
        print(f"DIFFERS: {difference}")
    print(
        "identical modulo times, ids and durations"
        if not differences
        else f"{len(differences)} difference(s)"
    )
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
