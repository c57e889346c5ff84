"""The suites, each a sibling of the others (none imports another); see ARCHITECTURE.md.

Each suite registers itself here with ``runtime.suite``: its kind and the import path of the
factory that rebuilds it from a ``SuiteRef`` (on this process, or on a Dask worker, which is sent
the path) and of its admission check, if any. ``runtime`` names no suite: importing any suite
module runs this table first.
A new suite is a package beside these and one line here.
"""

from metewand.runtime.suite import register

# kind -> (factory, admission check a Dask worker's registration runs, or None)
SUITES: dict[str, tuple[str, str | None]] = {
    "compute": ("metewand.suites.compute.suite:from_ref", None),
    "browser": ("metewand.suites.browser.suite:from_ref", "metewand.suites.browser.suite:admit"),
}

for _kind, (_factory, _admission) in SUITES.items():
    register(_kind, _factory, _admission)
