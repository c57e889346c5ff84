"""The suites, each a sibling of the others (none imports another); see ARCHITECTURE.md.

Each suite registers itself here with ``runtime.suite``: its kind and the import path of the
factory that rebuilds it from a ``SuiteRef`` (on this process, or on a Dask worker, which is sent
the path). ``runtime`` names no suite: importing any suite module runs this table first.
A new suite is a package beside these and one line here.
"""

from metewand.runtime.suite import register

SUITES = {
    "compute": "metewand.suites.compute.suite:from_ref",
    "browser": "metewand.suites.browser.suite:from_ref",
}

for _kind, _factory in SUITES.items():
    register(_kind, _factory)
