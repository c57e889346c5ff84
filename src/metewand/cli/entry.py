"""The ``metewand`` console script.

``metewand measure OPTIONS -- COMMAND ...`` is parsed by ``cli.measure_options`` and run
without importing click (its load is ~20-30 ms of CPU that ``measure`` is timed against);
everything else, and any measure command line that parser leaves alone, goes to the click group
in ``cli.main``.
"""

from __future__ import annotations

import sys


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["measure"]:
        from metewand.cli.measure_options import parse

        parsed = parse(argv[1:])
        if parsed is not None:
            from metewand.cli.measure_run import main as measure

            measure(parsed.values, parsed.command)
            return
    from metewand.cli.main import main as click_main

    click_main()


if __name__ == "__main__":
    main()
