"""Implementation: Python's built-in sort (Timsort, in C)."""

from common import read_values, write_sorted

from metewand.worker import Implementation

impl = Implementation()


@impl.prepare
def load(request: dict) -> list[int]:
    return read_values(request["dataset_dir"])


@impl.execute
def run(values: list[int], result_dir: str) -> tuple[dict, dict]:
    out = sorted(values)
    write_sorted(result_dir, out)
    return {"count": len(out)}, {"algorithm": "timsort"}


if __name__ == "__main__":
    raise SystemExit(impl.serve())
