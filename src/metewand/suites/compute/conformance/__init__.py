"""Conformance with the Rust metewand: its fixtures and test vectors, family by family.

``run(vectors_dir, worker)`` checks every vector of ``tests/vectors/rust`` (see its SOURCES.md)
and returns one ``Outcome`` per vector; ``table`` folds them into the per-family table
``metewand conformance`` prints (vectors / same / different, with the differences named).
"""
