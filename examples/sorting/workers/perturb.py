"""Dataset transformer: a nearly sorted copy of another integer dataset.

Sorts the source's values, then swaps ``swaps`` randomly chosen adjacent pairs (seeded), the
input on which adaptive sorts (Python's Timsort) and plain ones (heapsort) part ways.
"""

import os
import random

from common import read_values

from metewand.worker import Transformer

xform = Transformer()


@xform.transform
def perturb(source_dir: str, parameters: dict, seed: int, output_dir: str) -> None:
    values = sorted(read_values(source_dir))
    rng = random.Random(seed)
    for _ in range(int(parameters["swaps"]) if len(values) > 1 else 0):
        i = rng.randrange(len(values) - 1)
        values[i], values[i + 1] = values[i + 1], values[i]
    with open(os.path.join(output_dir, "values.txt"), "w") as fh:
        fh.write("".join(f"{v}\n" for v in values))


if __name__ == "__main__":
    raise SystemExit(xform.serve())
