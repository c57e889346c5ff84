"""Reading and writing the example's one-integer-per-line files."""

import os


def read_values(dataset_dir: str) -> list[int]:
    with open(os.path.join(dataset_dir, "values.txt")) as fh:
        return [int(line) for line in fh]


def write_sorted(result_dir: str, values: list[int]) -> None:
    with open(os.path.join(result_dir, "sorted.txt"), "w") as fh:
        fh.write("".join(f"{v}\n" for v in values))
