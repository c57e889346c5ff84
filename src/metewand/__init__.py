"""metewand: benchmark programs as processes and tell the truth about what they cost."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("metewand")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
