"""The ``metewand`` console script.

``metewand measure OPTIONS -- COMMAND ...`` is parsed by ``cli.measure_options`` and run
without importing click (its load is ~20-30 ms of CPU that ``measure`` is timed against);
everything else, and any measure command line that parser leaves alone, goes to the click group
in ``cli.main``.
"""

from __future__ import annotations

import atexit
import sys


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["measure"]:
        from metewand.cli.measure_options import parse

        parsed = parse(argv[1:])
        if parsed is not None:
            from metewand.cli.measure_run import main as measure

            outcome = [0]
            atexit.register(_exit_without_teardown, outcome)
            try:
                measure(parsed.values, parsed.command)
            except SystemExit as exc:  # measure's exits carry their code as an int
                outcome[0] = exc.code if isinstance(exc.code, int) else 1 if exc.code else 0
                raise
            return
    from metewand.cli.main import main as click_main

    click_main()


def _exit_without_teardown(outcome: list[int]) -> None:
    """At exit (atexit runs before the interpreter frees its modules): flush and end the
    process with measure's exit code, skipping the teardown of some 60 modules (5-10 ms of
    measure's fixed start-up, which is timed against hyperfine). Measure has finished everything
    by then: its groups removed, its spawn server reaped, its exports written, no thread left.
    An exception that ended the program (``sys.last_value``) gets Python's own exit."""
    import os

    if getattr(sys, "last_value", None) is not None:
        return
    code = outcome[0]
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: Python's own exit gives 120 then
            code = code or 120
    os._exit(code)


if __name__ == "__main__":
    main()
