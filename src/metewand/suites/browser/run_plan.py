"""Turn a ``RunConfig`` into a plan: valid selected tasks, resolved engines, ordered attempts.

Nothing here starts a process; every problem found here stops the run before it starts
(exit 2) or, for invalid task files under ``--keep-going``, is reported and skipped.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import os
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from metewand.errors import InvalidInput
from metewand.runtime.schedule import Rotation, schedule
from metewand.suites.browser.corpus import ValidationError
from metewand.suites.browser.engines import Missing, ResolvedEngine, UnknownEngine, resolve
from metewand.suites.browser.rows import PlannedAttempt
from metewand.suites.browser.run_config import RunConfig
from metewand.suites.browser.selection import explain_empty
from metewand.suites.browser.tasks import Corpus, Task, load_corpus, select_tasks

# Every planned attempt is built before the first runs; beyond this the plan is refused.
MAX_PLANNED_ATTEMPTS: Final = 1_000_000


class PlanError(InvalidInput, ValueError):
    """The run cannot start as asked; ``lines`` are shown to the user (exit 2)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


@dataclass
class Plan:
    config: RunConfig
    corpus: Corpus
    tasks: list[Task]
    engines: dict[str, ResolvedEngine | Missing]
    rotation: Rotation
    attempts: list[PlannedAttempt]
    skipped_invalid: list[ValidationError] = field(default_factory=list)

    @property
    def available(self) -> dict[str, ResolvedEngine]:
        return {n: e for n, e in self.engines.items() if isinstance(e, ResolvedEngine)}

    @property
    def missing(self) -> dict[str, Missing]:
        return {n: e for n, e in self.engines.items() if isinstance(e, Missing)}


def format_error(error: ValidationError) -> str:
    return f"{error.file}: {error.json_path}: {error.message}"


def build_plan(config: RunConfig) -> Plan:
    problems = config.problems()
    if problems:
        raise PlanError(problems)
    root = Path(config.tasks_dir)
    if not root.is_dir():
        raise PlanError([f"--tasks {root}: not a directory"])
    corpus = load_corpus(root)
    if corpus.manifest is None:
        raise PlanError([format_error(e) for e in corpus.errors] or [f"{root}: no manifest"])
    if corpus.setup_errors:
        # The manifest, routes or answers: the fixture server and the selection need them whole.
        lines = [format_error(e) for e in corpus.setup_errors]
        raise PlanError([*lines, f"{len(lines)} corpus error(s); nothing was run"])
    skipped: list[ValidationError] = []
    if corpus.errors:
        if not config.keep_going:
            lines = [format_error(e) for e in corpus.errors]
            raise PlanError(
                [
                    *lines,
                    f"{len(lines)} invalid task file error(s); nothing was run"
                    " (use --keep-going to skip invalid files)",
                ]
            )
        skipped = list(corpus.errors)
    _check_subsets(corpus, config.subsets)
    _check_task_ids(corpus, config.task_ids)
    tasks = select_tasks(corpus.tasks, config.subsets, config.task_ids, config.tags)
    if not tasks:
        pending = [p for p in corpus.pending if p.task_id in config.task_ids]
        why = explain_empty(corpus.tasks, config.subsets, config.task_ids, config.tags)
        raise PlanError(
            ["the selection (--subset/--task/--tag) matches no valid task:"]
            + [f"  {line}" for line in why]
            + [f"--task {p.task_id!r}: {p.reason}" for p in pending]
        )
    planned = len(tasks) * len(config.engines) * config.k
    if planned > MAX_PLANNED_ATTEMPTS:
        raise PlanError(
            [
                f"{len(tasks)} tasks x {len(config.engines)} engines x k={config.k} is "
                f"{planned} attempts, over the limit of {MAX_PLANNED_ATTEMPTS}"
            ]
        )
    tasks = [scale_timeouts(t, config.timeout_scale) for t in tasks]
    engines = resolve_engines(config)
    rotation = Rotation(tuple(config.engines), config.seed)
    # attempts are numbered from 1, as the peer benchmark numbers them (its artifact dirs and
    # per-attempt seeds use the same numbers)
    task_attempts = [(task, n) for n in range(1, config.k + 1) for task in tasks]
    attempts = [
        PlannedAttempt(
            slot.task_attempt[0], slot.engine, slot.task_attempt[1], slot.round, slot.position
        )
        for slot in schedule(rotation, task_attempts)
    ]
    if config.resource.calibration_mode == "interleaved":
        every = config.resource.calibration_every
        attempts = interleave_twins(attempts, twinned_rounds(attempts, every, config.seed))
    return Plan(config, corpus, tasks, engines, rotation, attempts, skipped)


def twinned_rounds(attempts: list[PlannedAttempt], every: int, seed: str) -> set[int]:
    """The rounds whose attempts get twins: all of them, or one in ``every`` (rounded up),
    drawn at random with the run's seed, so a resume draws the same and the sample spreads over
    tasks, attempts and the run's length rather than following the plan's order. A whole round
    is twinned: every engine is calibrated on the same task attempts."""
    rounds = sorted({planned.round for planned in attempts})
    if every <= 1:
        return set(rounds)
    wanted = -(-len(rounds) // every)
    return set(random.Random(f"calibration:{seed}").sample(rounds, wanted))


def interleave_twins(attempts: list[PlannedAttempt], rounds: set[int]) -> list[PlannedAttempt]:
    """Each attempt of ``rounds`` followed or preceded by its unprofiled twin, back to back in
    its round (so on the same engine process, minutes of host drift apart from nothing). Which
    twin goes first alternates per engine: every engine has as many profiled-first as
    unprofiled-first pairs (one more of the first when its count is odd), so the order's own
    effect (a warm cache for the second) cancels in the median."""
    seen: dict[str, int] = {}
    out = []
    for planned in attempts:
        if planned.round not in rounds:
            out.append(planned)
            continue
        twin = dataclasses.replace(planned, observed=False)
        index = seen.get(planned.engine, 0)
        seen[planned.engine] = index + 1
        out += [planned, twin] if index % 2 == 0 else [twin, planned]
    return out


def _check_subsets(corpus: Corpus, asked: tuple[str, ...] | list[str]) -> None:
    """Every ``--subset`` is in the manifest and has a task the suite runs (else: why not)."""
    assert corpus.manifest is not None
    problems = []
    for subset_id in asked:
        subset = corpus.manifest.subset(subset_id)
        if subset is None:
            problems.append(f"--subset {subset_id!r} is not in the corpus manifest")
            continue
        why = corpus.subset_status(subset).why_not_runnable
        if why is not None:
            problems.append(f"--subset {subset_id!r} has no runnable task: {why}")
    if problems:
        raise PlanError(problems)


def _check_task_ids(corpus: Corpus, asked: tuple[str, ...] | list[str]) -> None:
    """Every ``--task`` names a valid task of the corpus. With several ids, one that names
    nothing (a typo) would otherwise drop out of the selection unnoticed."""
    valid = {task.task_id for task in corpus.tasks}
    pending = {p.task_id: p.reason for p in corpus.pending}
    problems = []
    for task_id in dict.fromkeys(asked):
        if task_id in valid:
            continue
        if task_id in pending:
            problems.append(f"--task {task_id!r}: {pending[task_id]}")
            continue
        close = difflib.get_close_matches(task_id, sorted(valid), n=3, cutoff=0.8)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        problems.append(f"--task {task_id!r}: no valid task with this id in the corpus{hint}")
    if problems:
        raise PlanError([*problems, "nothing was run (`metewand browser list` names the tasks)"])


def not_run_subsets(plan: Plan) -> dict[str, str]:
    """Subsets inside the selection whose tasks are not run yet, with the reason."""
    assert plan.corpus.manifest is not None
    out = {}
    for subset in plan.corpus.manifest.subsets:
        if plan.config.subsets and subset.subset_id not in plan.config.subsets:
            continue
        status = plan.corpus.subset_status(subset)
        if status.pending:
            out[subset.subset_id] = f"{len(status.pending)} task(s) not run yet: " + "; ".join(
                status.pending_reasons
            )
    return out


def resolve_engines(config: RunConfig) -> dict[str, ResolvedEngine | Missing]:
    try:
        return {name: resolve(name, config.engine_paths.get(name)) for name in config.engines}
    except UnknownEngine as exc:
        raise PlanError([f"--engines: {exc}"]) from None


def scale_timeouts(task: Task, scale: float) -> Task:
    """``--timeout-scale``: every task timeout multiplied (slow hosts), recorded in the config."""
    if scale == 1.0:
        return task
    timeouts = {k: max(1, int(v * scale)) for k, v in task.data["timeouts"].items()}
    return dataclasses.replace(task, data={**task.data, "timeouts": timeouts})


# Not the corpus's content: a version-control store (a corpus at the root of a checkout holds
# one, and every commit changes it) and Python's bytecode caches.
NOT_CORPUS = frozenset({".git", ".hg", ".svn", "__pycache__"})


def _corpus_files(root: Path) -> Iterator[Path]:
    """Every file under ``root`` outside ``NOT_CORPUS``, which is pruned from the walk rather
    than listed and dropped (a checkout's ``.git`` holds more files than the corpus). Symlinked
    directories are not followed."""
    for top, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in NOT_CORPUS]
        for name in names:
            path = Path(top, name)
            if name not in NOT_CORPUS and path.is_file():
                yield path


def corpus_digest(root: Path, tasks: Sequence[Task] = ()) -> dict[str, Any]:
    """sha256 over sorted ``relpath NUL filesha256 LF`` of every file of the corpus (outside
    ``NOT_CORPUS`` directories).

    With ``tasks`` (the corpus's task files), also the parts a row's code identity takes
    (``compare.browser_code``): ``shared_sha256``, the same digest over every file that is no
    task's (fixture pages, routes, answers, configuration, other tasks' files excluded), and
    ``task_sha256``, each task's own file digest by task id. Editing one task's file then
    changes only that task's identity; editing a shared file changes every task's. Each file
    is read and hashed once for both."""
    digest, shared = hashlib.sha256(), hashlib.sha256()
    of_task = {task.path: task.task_id for task in tasks}
    task_sha: dict[str, str] = {}
    count = 0
    files = sorted(_corpus_files(root), key=lambda p: p.relative_to(root).as_posix().encode())
    for path in files:
        rel = path.relative_to(root).as_posix()
        file_sha = hashlib.sha256(path.read_bytes()).hexdigest()
        line = f"{rel}\0{file_sha}\n".encode()
        digest.update(line)
        if rel in of_task:
            task_sha[of_task[rel]] = file_sha
        else:
            shared.update(line)
        count += 1
    found: dict[str, Any] = {
        "path": str(root.resolve()),
        "sha256": digest.hexdigest(),
        "file_count": count,
    }
    if tasks:
        found["shared_sha256"] = shared.hexdigest()
        found["task_sha256"] = dict(sorted(task_sha.items()))
    return found
