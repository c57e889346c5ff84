"""Read a ``metewand.toml`` of either dialect into the typed ``Manifest`` (``manifest``).

The entry above the readers: TOML decoding, the dialect's detection (``manifest_dialect``), then
the metewand dialect's reader (``manifest_read``) or the Rust one (``manifest_rust``). The
readers import the types, never this module, so nothing here closes a circle.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import replace

from metewand.suites.compute.manifest import RUST_DIALECT, Manifest, ManifestError
from metewand.suites.compute.manifest_dialect import detect
from metewand.suites.compute.manifest_read import read_manifest
from metewand.suites.compute.manifest_rust import read_rust_manifest


def load(path: str, root: str | None = None) -> Manifest:
    """Read and validate a manifest; raises ManifestError listing every problem. ``root``: the
    directory its relative paths resolve against (default: the manifest's own; an A/B run's
    baseline side, ``suites.compute.ab``, reads the manifest against the baseline tree)."""
    try:
        with open(path, "rb") as fh:
            document = tomllib.load(fh)
    except OSError as exc:
        raise ManifestError([f"{path}: cannot read: {exc.strerror}"]) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError([f"{path}: invalid TOML: {exc}"]) from exc
    except UnicodeDecodeError as exc:
        raise ManifestError([f"{path}: not UTF-8 text (byte {exc.start}): {exc.reason}"]) from exc
    except RecursionError:
        raise ManifestError([f"{path}: invalid TOML: nested too deeply"]) from None
    try:
        dialect, why = detect(document)
    except ValueError as exc:
        raise ManifestError([f"{os.path.basename(path)}: {exc}"]) from exc
    try:
        if dialect == RUST_DIALECT:
            if root is not None:
                raise ManifestError(
                    [
                        f"{os.path.basename(path)}: a Rust-dialect manifest cannot be read against "
                        "another tree (--ab-baseline takes metewand-dialect manifests)"
                    ]
                )
            return read_rust_manifest(os.path.abspath(path), document, why)
        manifest = read_manifest(os.path.abspath(path), document, root)
        return replace(manifest, dialect_reason=why)
    except RecursionError:
        raise ManifestError([f"{path}: a value is nested too deeply"]) from None
