"""The compute suite as the runtime sees it (``runtime.suite``): units, slots, one unit's rows.

On the local executor a unit is one worker unit of the plan (one attempt on a fresh worker, or
warm-ups plus repetitions on one reused worker, released after its last attempt), minus the
attempts the run already holds. On Dask (``pair_on_host``) a unit is a *pairing group* of those
worker units (``pairing_groups``): every implementation of one case for one repetition (with
worker reuse: for all its repetitions, which share a worker), in the plan's order, so that the
attempts one ratio compares run on the same host one after the other. A slot holds nothing
between units: each worker unit starts its own implementation worker, so its attempts are
paired on one worker and no worker outlives its worker unit.

Ctrl-C (``interrupt``): every live worker process is killed and a worker started after that is
killed as it starts; an attempt cut short leaves neither row nor artifacts (``RunInterrupted``
discards its staging dir), so ``--resume`` runs exactly the attempts without a row.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from metewand import canonical
from metewand.runtime import rundir
from metewand.runtime.owned import OwnedJournal
from metewand.runtime.shared_run import SharedRunView
from metewand.runtime.store import RunStore, RunView
from metewand.runtime.suite import Row, SuiteRef, Unit, UnitEvents
from metewand.suites.compute.ab import Baseline, ab_plan, load_baseline, pairs_of
from metewand.suites.compute.execute import AttemptInput, AttemptRun, Timeouts
from metewand.suites.compute.experiment_select import select
from metewand.suites.compute.interrupt import RunInterrupted, SessionRegistry
from metewand.suites.compute.launch import Builder, launch_spec
from metewand.suites.compute.manifest import Manifest
from metewand.suites.compute.manifest_load import load
from metewand.suites.compute.materialize import DatasetCache, default_cache_dir
from metewand.suites.compute.plan import Plan, PlannedAttempt
from metewand.suites.compute.plan_expand import build_plan
from metewand.suites.compute.records import build_row
from metewand.suites.compute.session import WorkerSession
from metewand.suites.compute.workers import Containment, ImplementationWorker


class ComputeSlot:
    """Nothing is kept between units (each unit starts its own worker); a Dask worker's slot
    removes that worker's private work dir when it closes (``on_close``)."""

    def __init__(self, slot_id: str, on_close: Any = None) -> None:
        self.slot_id = slot_id
        self._on_close = on_close

    def close(self) -> None:
        if self._on_close is not None:
            self._on_close()


class ComputeSuite:
    kind = "compute"

    def __init__(
        self,
        manifest: Manifest,
        plan: Plan,
        store: RunStore | SharedRunView,
        *,
        jobs: int,
        cache_dir: str | None,
        accounting_backend: str,
        timeouts: Timeouts,
        log_limit: int,
        work_dir: str | None = None,
        phase_marks: bool = True,
        pair_on_host: bool = False,
        baseline: Baseline | None = None,
    ) -> None:
        self.manifest, self.plan, self.store, self.jobs = manifest, plan, store, jobs
        self.baseline = baseline  # an interleaved A/B run's baseline tree (suites.compute.ab)
        # which session of the run this is (0, then 1 per resume): A/B rows record it
        self.session = _session_of(store)
        self.pair_on_host = pair_on_host
        self.accounting_backend, self.timeouts, self.log_limit = (
            accounting_backend,
            timeouts,
            log_limit,
        )
        self.phase_marks = phase_marks
        self._attempts = {attempt.key: attempt for attempt in plan.attempts}
        # The client's work dir is the run's ``.work``; a Dask worker gets a private one (given
        # as ``work_dir``), since N workers sharing ``.work`` would delete each other's files.
        self.private_work_dir = work_dir is not None
        self.work_dir = work_dir or str(store.run_dir / rundir.WORK)
        shutil.rmtree(self.work_dir, ignore_errors=True)  # a killed session's leftovers
        os.makedirs(self.work_dir, exist_ok=True)
        # Every group and process this run makes is recorded before it can outlive a kill -9.
        self.journal = OwnedJournal(store.run_dir)
        self.containment = Containment(accounting_backend, self.journal.group)
        self.sessions = SessionRegistry()
        self.builder = Builder(
            manifest.root,
            os.path.join(self.work_dir, "build"),
            self.containment,
            on_start=self.journal.process,
        )
        self.base_builder = None
        if baseline is not None:  # the baseline side builds in its own tree and build dir
            self.base_builder = Builder(
                baseline.path,
                os.path.join(self.work_dir, "build-base"),
                self.containment,
                on_start=self.journal.process,
            )
        self.cache = DatasetCache(
            cache_dir or default_cache_dir(),
            self.work_dir,
            self.builder,
            on_start=self._started,
            containment=self.containment,
            definitions=plan.definitions,
            root_dir=manifest.root,
        )
        # Dask: the receipts a worker's cache made travel back as facts (``take_facts``); the
        # client's suite keeps them for the manifest (``merge_facts``), since a transformed
        # dataset's source is named by no row.
        self._receipts_sent: set[str] = set()
        self._worker_receipts: list[dict[str, Any]] = []

    # -- the protocol -----------------------------------------------------------------------

    def units(self) -> list[Unit]:
        """The plan's worker units in execution order, each without the attempts already done;
        with ``pair_on_host``, the pairing groups of them (``parts``: each worker unit's keys)."""
        done = self.store.finished_keys()
        if self.pair_on_host:
            return _group_units(pairing_groups(self.plan), self.plan, done)
        if self.baseline is not None:  # both halves of a pair, one after the other, one slot
            return [
                Unit(tuple(keys), {"parts": [[key] for key in keys]})
                for keys in pairs_of(self.plan, done)
            ]
        units = []
        for index, unit in enumerate(self.plan.units):
            todo = tuple(attempt.key for attempt in unit if attempt.key not in done)
            if todo:
                units.append(Unit(todo, {"unit": index}))
        return units

    def prepare(self) -> None:
        pass  # datasets and builds are made on first use, inside the attempts' units

    def open_slot(self, slot_id: str) -> ComputeSlot:
        return ComputeSlot(slot_id, self.teardown if self.private_work_dir else None)

    def run_unit(self, slot: Any, unit: Unit, events: UnitEvents | None = None) -> list[Row]:
        """A worker unit's attempts on one implementation worker; a pairing group's worker
        units one after the other, each on its own worker."""
        parts = unit.payload.get("parts") or [list(unit.keys)]
        rows: list[Row] = []
        for keys in parts:
            if self.sessions.stopping:
                break
            rows += self._run_worker_unit(tuple(keys), events)
        return rows

    def _run_worker_unit(self, keys: tuple[str, ...], events: UnitEvents | None) -> list[Row]:
        worker = ImplementationWorker(
            self.accounting_backend, self.log_limit, self._started, containment=self.containment
        )
        rows = []
        try:
            for index, key in enumerate(keys):
                if self.sessions.stopping:
                    break
                if events is not None:
                    events.attempt_started(key)
                last = index == len(keys) - 1
                row = self._run_attempt(self._attempts[key], worker, last)
                rows.append(row)
                if events is not None:
                    events.attempt_finished(row)
        finally:
            worker.finish(self.timeouts.shutdown_s)
        return rows

    def interrupt(self) -> None:
        self.sessions.stop()

    def teardown(self) -> None:
        shutil.rmtree(self.work_dir, ignore_errors=True)

    def finish(self, completed: bool) -> None:
        if not completed or not isinstance(self.store, RunStore):
            return
        # Every row of the run, so a resumed run keeps the receipts of its earlier sessions;
        # plus this session's sources of transformed datasets, which no attempt names directly.
        built = [*self.cache.receipts(), *self._worker_receipts]
        receipts = _receipts(self.store.rows(), built)
        self.store.update_manifest({"dataset_materializations": receipts})

    def take_facts(self) -> list[dict[str, Any]]:
        """Worker side: the materialization receipts this worker's cache made since last asked."""
        facts = []
        for receipt in self.cache.receipts():
            if receipt["derivation_id"] not in self._receipts_sent:
                self._receipts_sent.add(receipt["derivation_id"])
                facts.append({"kind": "dataset_materialization", "receipt": receipt})
        return facts

    def merge_facts(self, facts: list[dict[str, Any]], placement: dict[str, Any]) -> None:
        """Client side: a worker's receipts, recorded in the manifest when the run finishes."""
        for fact in facts:
            if fact.get("kind") == "dataset_materialization":
                self._worker_receipts.append(fact["receipt"])

    # -- one attempt ------------------------------------------------------------------------

    def _started(self, session: WorkerSession) -> None:
        if session.pid is not None:
            self.journal.process(session.pid)
        self.sessions.started(session)

    def _run_attempt(
        self, attempt: PlannedAttempt, worker: ImplementationWorker, last: bool
    ) -> Row:
        dataset = self.cache.get(attempt.dataset)
        impl_def = self.manifest.implementations[attempt.implementation]
        builder, definitions = self.builder, self.plan.definitions
        if attempt.ab_side == "base" and self.baseline and self.base_builder:
            impl_def = self.baseline.manifest.implementations[attempt.implementation]
            builder, definitions = self.base_builder, self.baseline.definitions
        problem = self.manifest.problems[attempt.problem]
        impl_build = builder.build(f"impl-{impl_def.name}", impl_def.launch)
        eval_build = self.builder.build(f"eval-{problem.name}", problem.evaluator)
        setup_error = dataset.error or impl_build.error or eval_build.error
        rel = f"artifacts/{attempt.key}"
        with self.store.artifact_dir(attempt.key) as staging:
            adir = str(staging)
            spec = AttemptInput(
                attempt=attempt,
                problem=problem,
                dataset=dataset,
                implementation=launch_spec(
                    "implementation",
                    impl_def.launch,
                    adir,
                    impl_build.build_dir,
                    ("one_shot",),
                    definitions,
                ),
                evaluator=launch_spec(
                    "problem_evaluator",
                    problem.evaluator,
                    adir,
                    eval_build.build_dir,
                    definitions=self.plan.definitions,
                ),
                attempt_dir=adir,
                timeouts=self.timeouts,
                setup_error=setup_error,
                phase_marks=self.phase_marks,
                dataset_output_schema=self._output_schema(attempt),
            )
            outcome = AttemptRun(spec, worker, release_worker=last).run()
            if self.sessions.stopping:  # cut short by the interrupt: not a result
                raise RunInterrupted(attempt.key)
            row = build_row(outcome, spec, dataset.receipt, adir, rel, self.jobs)
            if "ab" in row:  # which session ran it: a pair split by a resume is not back to back
                row["ab"] = {**row["ab"], "session": self.session}
            return row

    def _output_schema(self, attempt: PlannedAttempt) -> str:
        from metewand.suites.compute.definitions import dataset_output_schema

        if self.plan.definitions is None:
            return ""
        return dataset_output_schema(self.plan.definitions, attempt.dataset.definition)


def _session_of(store: RunStore | SharedRunView) -> int:
    """0 for the run's first session, then one more per resume (a Dask worker's view reads the
    client's manifest from the run directory)."""
    return len(store.manifest.get("resumed_at") or [])


def pairing_groups(plan: Plan) -> list[list[int]]:
    """The plan's worker units (by index) grouped into what must run on one host: one case's
    implementations (every implementation configuration of one dataset configuration and
    problem configuration) for one repetition. With worker reuse a worker unit holds every
    repetition of its implementation, so the group is the case's worker units whole.

    Groups are in the order of their first worker unit in the plan, and a group's worker units
    keep their plan order: on its host a group runs in the plan's (seeded, balanced) order."""
    groups: dict[str, list[int]] = {}
    for index, unit in enumerate(plan.units):
        groups.setdefault(_pairing_key(unit), []).append(index)
    return list(groups.values())


def _pairing_key(unit: tuple[PlannedAttempt, ...]) -> str:
    first = unit[0]
    case = [
        first.experiment,
        first.case,
        first.dataset.identity,
        canonical.dumps(first.problem_parameters).decode(),
    ]
    if not first.policy.worker_reuse:  # one attempt per worker unit: pair per repetition
        case.append(str(first.repetition))  # warm-ups are repetition 0: on its host
    return "\x00".join(case)


def _group_units(groups: list[list[int]], plan: Plan, done: set[str]) -> list[Unit]:
    units = []
    for members in groups:
        parts = [
            [attempt.key for attempt in plan.units[index] if attempt.key not in done]
            for index in members
        ]
        parts = [part for part in parts if part]
        if parts:
            keys = tuple(key for part in parts for key in part)
            units.append(Unit(keys, {"units": members, "parts": parts}))
    return units


def suite_config(
    manifest_path: str,
    max_attempts: int,
    run_dir: Path | str,
    *,
    jobs: int,
    cache_dir: str | None,
    accounting_backend: str,
    timeouts: Timeouts,
    log_limit: int,
    phase_marks: bool = True,
    ab_baseline: str | None = None,
    experiments: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The JSON config ``from_ref`` rebuilds the suite from (all paths absolute)."""
    return {
        "manifest_path": os.path.abspath(manifest_path),
        "max_attempts": max_attempts,
        "run_dir": os.path.abspath(run_dir),
        "jobs": jobs,
        "cache_dir": cache_dir,
        "accounting_backend": accounting_backend,
        "timeouts": dataclasses.asdict(timeouts),
        "log_limit": log_limit,
        "phase_marks": phase_marks,
        "ab_baseline": ab_baseline,
        "experiments": list(experiments),
    }


def from_ref(ref: SuiteRef) -> ComputeSuite:
    """The worker-side suite (``--executor dask``): it only runs units. Rows go back as data
    (the client writes them); artifacts are published into the run directory whole through
    ``SharedRunView`` (the run directory must be on this host or a shared filesystem); its
    scratch files live in a private dir under the run's ``.work``, removed when its slot closes
    (and with ``.work`` by the client's next session, should this worker die with the run)."""
    config = ref.config
    manifest = select(load(config["manifest_path"]), config.get("experiments") or ())
    plan = build_plan(manifest, int(config["max_attempts"]))
    baseline = None
    if config.get("ab_baseline"):
        baseline = load_baseline(config["manifest_path"], config["ab_baseline"])
        plan = ab_plan(plan, baseline)
    run_dir = Path(config["run_dir"])
    RunView(run_dir).manifest  # noqa: B018 - a clear StoreError here when the run is not there
    return ComputeSuite(
        manifest,
        plan,
        SharedRunView(run_dir),
        jobs=int(config["jobs"]),
        cache_dir=config["cache_dir"],
        accounting_backend=config["accounting_backend"],
        timeouts=Timeouts(**config["timeouts"]),
        log_limit=int(config["log_limit"]),
        work_dir=_private_work_dir(run_dir),
        phase_marks=bool(config.get("phase_marks", True)),
        baseline=baseline,
    )


def _private_work_dir(run_dir: Path) -> str:
    shared = run_dir / rundir.WORK
    shared.mkdir(exist_ok=True)
    return tempfile.mkdtemp(prefix=f"dask-{os.getpid()}-", dir=shared)


def _receipts(
    rows: list[dict[str, Any]], built: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for row in rows:
        receipt = row["record"]["provenance"]["data"]["context"]["dataset_materialization"]
        seen.setdefault(receipt["derivation_id"], receipt)
    for receipt in built or []:
        seen.setdefault(receipt["derivation_id"], receipt)
    return list(seen.values())
