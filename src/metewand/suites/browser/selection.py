"""Tags of a corpus, and why a selection (``--tag``, ``--subset``, ``--task``) came out empty.

A selection is the intersection of its filters (within one filter, any of its values). When it
keeps no task, ``explain_empty`` replays the filters one at a time and says what each left, and
where those tasks live, e.g. ``--tag purpose.smoke: 4 tasks, all in l1.raw_cdp`` then
``--subset l1.playwright: 0 of them`` — so the user sees which filter removed what.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from metewand.suites.browser.tasks import Task

TAGS_NAMED = 12  # an unknown tag's message names at most this many of the corpus's tags


def tag_counts(tasks: Iterable[Task]) -> dict[str, int]:
    """Tasks per tag, most common first (then by name)."""
    counts = Counter(tag for task in tasks for tag in task.tags)
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def tasks_text(n: int) -> str:
    return f"{n} task" if n == 1 else f"{n} tasks"


def _where(tasks: Sequence[Task]) -> str:
    subsets = Counter(task.subset_id for task in tasks)
    if len(subsets) == 1:
        return f"all in {next(iter(subsets))}"
    return "in " + ", ".join(f"{name} ({n})" for name, n in sorted(subsets.items()))


def _flag(name: str, values: Sequence[str]) -> str:
    return ", ".join(f"{name} {value}" for value in values)


def _unknown(name: str, values: Sequence[str], everything: Sequence[Task]) -> str:
    """Why the first filter alone keeps nothing: the value is nowhere in the corpus."""
    if name == "--tag":
        known = list(tag_counts(everything))
        close = [m for v in values for m in difflib.get_close_matches(v, known, n=3, cutoff=0.8)]
        listed = ", ".join(known[:TAGS_NAMED]) + (", ..." if len(known) > TAGS_NAMED else "")
        hint = f"did you mean {' or '.join(dict.fromkeys(close))}? " if close else ""
        return (
            f"no task has {'this tag' if len(values) == 1 else 'any of these tags'} "
            f"({hint}tags here: {listed or 'none'}; `metewand browser list` shows them "
            "per subset)"
        )
    if name == "--subset":
        return "no valid task in this subset"
    return "no valid task with this id"


def explain_empty(
    tasks: Sequence[Task],
    subsets: Sequence[str] = (),
    task_ids: Sequence[str] = (),
    tags: Sequence[str] = (),
) -> list[str]:
    """One line per given filter, in the order tag, subset, task: what it kept of what was left."""
    filters: list[tuple[str, Sequence[str], Callable[[Task], bool]]] = [
        ("--tag", tags, lambda t: bool(set(tags).intersection(t.tags))),
        ("--subset", subsets, lambda t: t.subset_id in subsets),
        ("--task", task_ids, lambda t: t.task_id in task_ids),
    ]
    left: Sequence[Task] = tasks
    lines: list[str] = []
    for name, values, keeps in filters:
        if not values:
            continue
        kept = [task for task in left if keeps(task)]
        flag = _flag(name, values)
        if not lines:  # the first filter: what the whole corpus has
            lines.append(
                f"{flag}: {tasks_text(len(kept))}, {_where(kept)}"
                if kept
                else f"{flag}: {_unknown(name, values, tasks)}"
            )
        elif kept:
            lines.append(f"{flag}: {len(kept)} of them, {_where(kept)}")
        else:  # this filter emptied the selection: what it would keep on its own
            alone = [task for task in tasks if keeps(task)]
            why = f"on its own {tasks_text(len(alone))}" if alone else _unknown(name, values, tasks)
            lines.append(f"{flag}: 0 of them ({why})")
        left = kept
        if not kept:
            break
    return lines
