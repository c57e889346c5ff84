"""Host telemetry: whole-machine evidence (host_scope) sampled beside a benchmark run.

Samples are ``abb_host_telemetry/1`` objects: load averages, memory and swap, swap-in/out
activity, CPU / memory / IO pressure (PSI), the number of processes descending from the
benchmark's root pid, and (our own key ``foreign_cpu``) the CPU the machine spent beside the
benchmark since the previous sample, with the foreign processes that spent most of it
(``measure.foreign``). The pollution gate (``measure.host_gate``) judges them; nothing here ever
touches a functional result.

A value that cannot be read is ``null`` in the sample with an entry in ``unavailable`` naming
the reason (never 0). This module imports nothing above ``measure``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

from metewand.measure import procfs
from metewand.measure.clock import utc_now
from metewand.measure.foreign import ForeignCpuTracker, MemberPids
from metewand.measure.forms import Reason
from metewand.measure.host_facts import (
    PROC,
    PathArg,
    meminfo_bytes,
    read_text,
    reason_for,
    summary_facts,
    unavailable_reason,
)
from metewand.measure.host_gate import (
    GateThresholds,
    evaluate_gate,
    foreign_cpu_outcome,
    top_foreign_over,
)
from metewand.measure.order_stats import middle

HOST_TELEMETRY_SCHEMA = "abb_host_telemetry/1"
HOST_SUMMARY_SCHEMA = "abb_host_summary/1"
PSI_RESOURCES = ("cpu", "memory", "io")
MIN_INTERVAL_S = 0.1

Sample = dict[str, Any]
SampleSink = Callable[[Sample], None]


class Spool:
    """A ``HostTelemetry`` sink: its lines in an anonymous temporary file of its own, read back
    for the summary, so the samples stay out of memory and nothing is left on disk."""


# ---- readers (each returns a value, or raises OSError/ValueError for the caller to record) ----


def read_loadavg(proc: PathArg = PROC) -> dict[str, float]:
    one, five, fifteen = read_text(proc, "loadavg").split()[:3]
    return {"one": float(one), "five": float(five), "fifteen": float(fifteen)}


def read_meminfo(proc: PathArg = PROC) -> dict[str, int]:
    """Memory and swap in bytes (meminfo reports kB)."""
    fields = meminfo_bytes(proc)
    swap_total, swap_free = fields["SwapTotal"], fields["SwapFree"]
    return {
        "total_bytes": fields["MemTotal"],
        "available_bytes": fields["MemAvailable"],
        "swap_total_bytes": swap_total,
        "swap_free_bytes": swap_free,
        "swap_used_bytes": swap_total - swap_free,
    }


def read_swap_counters(proc: PathArg = PROC) -> dict[str, int]:
    """Cumulative pages swapped in/out since boot (``/proc/vmstat``)."""
    wanted = {"pswpin": "pswpin_pages", "pswpout": "pswpout_pages"}
    out: dict[str, int] = {}
    for line in read_text(proc, "vmstat").splitlines():
        name, _, value = line.partition(" ")
        if name in wanted:
            out[wanted[name]] = int(value)
    if len(out) != len(wanted):
        raise ValueError("pswpin/pswpout missing from /proc/vmstat")
    return out


def parse_psi(text: str) -> dict[str, dict[str, float]]:
    """``some avg10=.. avg60=.. avg300=.. total=..`` lines → {some|full: {avg10, ..., total}}."""
    out: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        kind, *pairs = line.split()
        values: dict[str, float] = {}
        for pair in pairs:
            key, _, raw = pair.partition("=")
            values[key] = int(raw) if key == "total" else float(raw)
        out[kind] = values
    if "some" not in out:
        raise ValueError("PSI file has no 'some' line")
    return out


def read_psi(resource: str, proc: PathArg = PROC) -> dict[str, dict[str, float]]:
    return parse_psi(read_text(proc, "pressure", resource))


def descendant_pids(root_pid: int, proc: PathArg = PROC) -> list[int]:
    """Every live descendant of ``root_pid`` (root excluded), sorted."""
    return sorted(procfs.descendants(root_pid, str(proc))[1:])


# ---- one sample ----


def take_sample(
    root_pid: int,
    seq: int,
    previous: Sample | None,
    proc: PathArg = PROC,
    foreign: ForeignCpuTracker | None = None,
) -> Sample:
    """One ``abb_host_telemetry/1`` sample; unreadable parts are null with a reason.

    With a ``foreign`` tracker the sample also carries ``foreign_cpu`` (null on the tracker's
    first observation: there is no interval yet).
    """
    sample: Sample = {
        "schema": HOST_TELEMETRY_SCHEMA,
        "seq": seq,
        "timestamp": utc_now(),
        "monotonic_ns": time.monotonic_ns(),
        "root_pid": root_pid,
    }
    unavailable: dict[str, dict[str, str]] = {}
    readers: list[tuple[str, Callable[[], Any]]] = [
        ("loadavg", lambda: read_loadavg(proc)),
        ("memory", lambda: read_meminfo(proc)),
        ("vmstat", lambda: read_swap_counters(proc)),
    ]
    readers += [(f"psi_{r}", _psi_reader(r, proc)) for r in PSI_RESOURCES]
    if foreign is not None:
        foreign.tree_size = None
        readers.append(("foreign_cpu", foreign.observe))
    # the foreign scan has just read every process's parent: the tree is counted from it
    readers.append(
        ("bench_descendant_process_count", lambda: _descendant_count(root_pid, proc, foreign))
    )
    for field, read in readers:
        try:
            sample[field] = read()
        except (OSError, ValueError, KeyError) as exc:
            sample[field] = None
            reason = reason_for(exc) if isinstance(exc, OSError) else Reason.UNSUPPORTED
            unavailable[field] = unavailable_reason(reason, f"{type(exc).__name__}: {exc}")
    sample["psi"] = {r: sample.pop(f"psi_{r}") for r in PSI_RESOURCES}
    for r in PSI_RESOURCES:
        if f"psi_{r}" in unavailable:
            unavailable[f"psi.{r}"] = unavailable.pop(f"psi_{r}")
    sample["swap_activity"] = _swap_delta(sample.get("vmstat"), previous)
    if foreign is not None and sample["foreign_cpu"] is None and "foreign_cpu" not in unavailable:
        detail = "first observation: foreign CPU needs an interval to difference"
        unavailable["foreign_cpu"] = unavailable_reason(Reason.NOT_STARTED, detail)
    sample["unavailable"] = unavailable
    return sample


def _descendant_count(root_pid: int, proc: PathArg, foreign: ForeignCpuTracker | None) -> int:
    if (
        foreign is not None
        and foreign.tree_size is not None
        and foreign.root_pid == root_pid
        and foreign.proc == str(proc)
    ):
        return foreign.tree_size
    return len(descendant_pids(root_pid, proc))


def _psi_reader(resource: str, proc: PathArg) -> Callable[[], Any]:
    return lambda: read_psi(resource, proc)


def _swap_delta(vmstat: dict[str, int] | None, previous: Sample | None) -> dict[str, int] | None:
    """Pages swapped in/out since the previous sample (null for the first or unreadable)."""
    before = previous.get("vmstat") if previous else None
    if vmstat is None or before is None:
        return None
    return {
        "pswpin_delta_pages": vmstat["pswpin_pages"] - before["pswpin_pages"],
        "pswpout_delta_pages": vmstat["pswpout_pages"] - before["pswpout_pages"],
    }


# ---- background sampler ----


class HostTelemetry:
    """Samples the host every ``interval_s`` in a daemon thread.

    ``sink`` is a path (``host_telemetry.jsonl``: one canonical line per sample, flushed per
    line), a ``Spool`` (the same lines in an anonymous temporary file: a Dask worker's, whose
    samples stay on its host) or a callable receiving each sample. ``stop()`` returns the
    ``host_summary.json`` content, including the pollution-gate verdict under the recorded
    thresholds. With a path or a spool, the samples are not kept in memory (~7.5 KB each, one
    every 2 s: ~10 MB an hour of a run, kept to its end): ``samples`` reads this telemetry's
    lines back. Otherwise they are kept (``measure`` puts them in its record).
    ``member_pids`` names the benchmark's processes outside ``root_pid``'s tree (the members of
    its accounting groups), so their CPU is never foreign.
    """

    def __init__(
        self,
        interval_s: float,
        root_pid: int,
        sink: str | os.PathLike[str] | Spool | SampleSink | None = None,
        thresholds: GateThresholds | None = None,
        member_pids: MemberPids | None = None,
        min_foreign_interval_s: float = 0.0,
    ) -> None:
        if interval_s < MIN_INTERVAL_S:
            raise ValueError(f"interval_s must be >= {MIN_INTERVAL_S}, got {interval_s}")
        self.interval_s = float(interval_s)
        self.root_pid = root_pid
        self.thresholds = thresholds or GateThresholds()
        self._kept: list[Sample] = []  # without a file of its own
        self._count = 0
        self._previous: Sample | None = None
        self.errors: list[str] = []
        self.foreign = ForeignCpuTracker(root_pid, member_pids, proc=str(PROC))
        # /proc CPU figures move in 10 ms clock ticks: a forced sample a few ms after the last
        # one would turn one tick into "a core"; such a sample defers foreign CPU to the next
        self.min_foreign_interval_ns = int(min_foreign_interval_s * 1e9)
        self._last_foreign_ns: int | None = None
        self._record_lock = threading.Lock()  # the loop and sample_now() may meet
        self._sink = sink
        self._file: Any = None
        self._file_start = 0  # where this telemetry's lines begin (a resumed run appends)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sampler_cpu_ns = 0
        self.started_at: str | None = None
        self.ended_at: str | None = None

    def claim_session(self, session: int) -> None:
        """A session the benchmark just launched (``ForeignCpuTracker.claim_session``)."""
        self.foreign.claim_session(session)

    def start(self) -> HostTelemetry:
        if self._thread is not None:
            raise RuntimeError("HostTelemetry already started")
        if isinstance(self._sink, Spool):
            import tempfile  # only a spool needs it (``measure`` starts without it)

            # unlinked at once: nothing is left on disk, whatever ends the process
            self._file = tempfile.TemporaryFile(prefix="metewand-host-telemetry-")  # noqa: SIM115
        elif self._sink is not None and not callable(self._sink):
            self._file = open(self._sink, "ab")  # noqa: SIM115 - closed in stop()
            self._file_start = self._file.tell()
        self.started_at = utc_now()
        self._record_one()  # a synchronous first sample: the run's starting point
        self._thread = threading.Thread(target=self._loop, name="host-telemetry", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._record_one()

    def sample_now(self) -> None:
        """One extra sample now (between the commands of ``measure``), beside the loop's."""
        if self._thread is not None and not self._stop.is_set():
            self._record_one()

    def _record_one(self) -> None:
        with self._record_lock:
            before = time.thread_time_ns()
            try:
                self._append_sample()
            except Exception as exc:  # the observer must never take the run down
                self.errors.append(f"{type(exc).__name__}: {exc}")
            finally:
                self._sampler_cpu_ns += time.thread_time_ns() - before

    @property
    def _in_memory(self) -> bool:
        return self._sink is None or callable(self._sink)

    @property
    def samples(self) -> list[Sample]:
        """Every sample so far, in order: read back from the file when there is one (a file
        that cannot be read back is a sampler error, and no sample)."""
        if self._in_memory:
            return self._kept
        import json  # the file's lines are canonical JSON, which json reads to the same values

        try:
            return [json.loads(line) for line in self._written().splitlines()]
        except (OSError, ValueError) as exc:
            self.errors.append(f"host telemetry could not be read back: {exc}")
            return []

    def _written(self) -> bytes:
        """This telemetry's lines as written so far."""
        if isinstance(self._sink, Spool):
            with self._record_lock:  # the thread appends through the same handle
                if self._file is None:  # stopped: its summary was made before the close
                    return b""
                self._file.seek(0)
                data: bytes = self._file.read()
                self._file.seek(0, os.SEEK_END)
                return data
        assert self._sink is not None and not callable(self._sink)
        with open(self._sink, "rb") as handle:
            handle.seek(self._file_start)
            return handle.read()

    def _append_sample(self) -> None:
        previous = self._previous
        now = time.monotonic_ns()
        since = None if self._last_foreign_ns is None else now - self._last_foreign_ns
        deferred = since is not None and since < self.min_foreign_interval_ns
        foreign = None if deferred else self.foreign
        sample = take_sample(self.root_pid, self._count, previous, foreign=foreign)
        if deferred:
            assert since is not None
            detail = (
                f"deferred: {since / 1e6:.0f} ms since the previous foreign observation, under "
                f"the {self.min_foreign_interval_ns / 1e6:.0f} ms minimum; the next covers it"
            )
            sample["foreign_cpu"] = None
            sample["unavailable"]["foreign_cpu"] = unavailable_reason(Reason.NOT_STARTED, detail)
        else:
            self._last_foreign_ns = now
        self._count += 1
        self._previous = sample
        if self._in_memory:
            self._kept.append(sample)
        self._emit(sample)

    def _emit(self, sample: Sample) -> None:
        if self._file is not None:
            from metewand import canonical  # only when samples are written to a file

            self._file.write(canonical.line(sample))
            self._file.flush()
        elif callable(self._sink):
            self._sink(sample)

    def stop(self) -> dict[str, Any]:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=max(5.0, 2 * self.interval_s))
            if self._thread.is_alive():
                self.errors.append("host telemetry thread did not stop in time")
            else:
                self._record_one()  # a final sample: the run's end point
        # the kept /proc descriptors, once no scan can use them (a thread that did not stop
        # in time may still be in one; one stuck for good keeps them, and the run ends anyway)
        if self._record_lock.acquire(timeout=5.0):
            try:
                self.foreign.close()
            finally:
                self._record_lock.release()
        self.ended_at = utc_now()
        summary = self.summary()  # before the file closes: a spool's lines go with it
        if self._file is not None:
            self._file.close()
            self._file = None
        return summary

    def __enter__(self) -> HostTelemetry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def sampler_cpu_ns(self) -> int:
        """CPU the telemetry thread has spent so far (an observer's cost, not the harness's)."""
        return self._sampler_cpu_ns

    def summary(self) -> dict[str, Any]:
        """``host_summary.json`` content (``abb_host_summary/1``)."""
        samples = self.samples
        verdict = evaluate_gate(samples, self.thresholds, sampler_errors=self.errors)
        counts = [s["bench_descendant_process_count"] for s in samples]
        counts = [c for c in counts if c is not None]
        return {
            "schema": HOST_SUMMARY_SCHEMA,
            "telemetry_schema": HOST_TELEMETRY_SCHEMA,
            "scope": "host_scope",
            "affects_functional_score": False,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "interval_s": self.interval_s,
            "root_pid": self.root_pid,
            "sample_count": len(samples),
            "sampler_cpu_ms": round(self._sampler_cpu_ns / 1e6, 3),
            "sampler_errors": list(self.errors),
            "max_bench_descendant_process_count": max(counts) if counts else None,
            "polluted": not verdict["passed"],
            "flags": [t["condition"] for t in verdict["triggered"]],
            "gate": verdict,
            "host": summary_facts(),
            "foreign_cpu": foreign_summary(samples, self.thresholds, self.foreign),
        }


def foreign_summary(
    samples: list[Sample], th: GateThresholds, tracker: ForeignCpuTracker
) -> dict[str, Any]:
    """``host_summary.json``'s ``foreign_cpu``: the threshold, per-sample figures in brief,
    the gate's reading of them, the heaviest foreign processes and those started in the run."""
    figured = [s["foreign_cpu"] for s in samples if s.get("foreign_cpu")]
    values = [f["foreign_cpu_cores"] for f in figured]
    visible = [f["visible_foreign_cpu_cores"] for f in figured]
    gate = foreign_cpu_outcome(samples, th)
    return {
        "threshold_cores": th.foreign_cpu_max_cores,
        "sustained_samples": th.sustained_samples,
        "sample_count": len(values),
        "median_cores": round(middle(values), 4) if values else None,
        "max_cores": max(values) if values else None,
        # what processes seen by two scans spent; the rest went to processes born and gone
        # between samples, to interrupts, or to processes this /proc does not show
        "median_visible_cores": round(middle(visible), 4) if visible else None,
        "gate": {
            "evaluated": gate.triggered is not None,
            "triggered": bool(gate.triggered),
            "detail": gate.detail,
            "figures": gate.figures,
        },
        "top_foreign": top_foreign_over(samples),
        "started_during_run": tracker.started_foreign(),
        "member_errors": list(tracker.member_errors),
    }
