"""metewand: benchmark programs as processes and tell the truth about what they cost."""

# The fixed-dataset API is imported lazily so `import metewand` (and every worker) stays cheap.
_COMPUTE_API = ("run_fixed_dataset_outcome", "FixedDatasetResult", "FixedDatasetFailure")


def __getattr__(name: str) -> object:  # no typing import: every start-up pays for this module
    if name == "__version__":
        from metewand.version import tool_version

        return tool_version()
    if name in _COMPUTE_API:
        from metewand.suites.compute import api

        return getattr(api, name)
    raise AttributeError(f"module 'metewand' has no attribute {name!r}")


__all__ = ["__version__", *_COMPUTE_API]
