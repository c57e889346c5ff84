"""The installed metewand's version: what manifests, provenance and the facade's ``__version__``
report. It sits below every layer, so any module may ask without importing the public facade
(``metewand/__init__.py``), whose other attributes reach into the compute suite."""

import functools


@functools.cache
def tool_version() -> str:
    # Looked up on first use: importlib.metadata scans every installed distribution (30-130 ms
    # here), which `metewand --help` and every worker start would otherwise pay for nothing.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("metewand")
    except PackageNotFoundError:  # running from a source tree without install
        return "0.0.0+unknown"
