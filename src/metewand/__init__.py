"""metewand: benchmark programs as processes and tell the truth about what they cost."""

import functools
from typing import Any


@functools.cache
def _version() -> str:
    # Looked up on first use: importlib.metadata scans every installed distribution (30-130 ms
    # here), which `metewand --help` and every worker start would otherwise pay for nothing.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("metewand")
    except PackageNotFoundError:  # running from a source tree without install
        return "0.0.0+unknown"


# The fixed-dataset API is imported lazily so `import metewand` (and every worker) stays cheap.
_COMPUTE_API = ("run_fixed_dataset_outcome", "FixedDatasetResult", "FixedDatasetFailure")


def __getattr__(name: str) -> Any:
    if name == "__version__":
        return _version()
    if name in _COMPUTE_API:
        from metewand.suites.compute import api

        return getattr(api, name)
    raise AttributeError(f"module 'metewand' has no attribute {name!r}")


__all__ = ["__version__", *_COMPUTE_API]
