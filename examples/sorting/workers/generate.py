"""Dataset materializer: integers of a given size and distribution, one per line."""

import os
import random

from metewand.worker import Materializer

gen = Materializer()


@gen.materialize
def build(parameters: dict, seed: int, output_dir: str) -> None:
    rng = random.Random(seed)
    size, kind = int(parameters["size"]), parameters["distribution"]
    if kind == "uniform":
        values = [rng.randrange(-(10**9), 10**9) for _ in range(size)]
    elif kind == "few_unique":
        values = [rng.randrange(8) for _ in range(size)]
    elif kind == "sorted":
        values = sorted(rng.randrange(-(10**9), 10**9) for _ in range(size))
    elif kind == "reversed":
        values = sorted((rng.randrange(-(10**9), 10**9) for _ in range(size)), reverse=True)
    else:
        raise ValueError(f"unknown distribution {kind!r}")
    with open(os.path.join(output_dir, "values.txt"), "w") as fh:
        fh.write("".join(f"{v}\n" for v in values))


if __name__ == "__main__":
    raise SystemExit(gen.serve())
