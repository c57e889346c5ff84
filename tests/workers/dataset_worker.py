"""Dataset workers for the derived-dataset tests. argv[1]: gen | xform.

gen writes values.txt with ``size`` integers counting down from the seed's last digit + size;
METEWAND_TEST_MODE=invalid answers materialize naming a dataset manifest it never wrote.
xform writes the source's values sorted and multiplied by ``factor``;
METEWAND_TEST_MODE=modify_source also appends to the source dataset (which must be refused).
"""

import os
import sys

from metewand.worker import Materializer, Transformer

MODE = os.environ.get("METEWAND_TEST_MODE", "ok")


def generator() -> Materializer:
    gen = Materializer()

    @gen.materialize
    def build(parameters: dict, seed: int, output_dir: str) -> None:
        size = int(parameters.get("size", 3))
        with open(os.path.join(output_dir, "values.txt"), "w") as fh:
            fh.write("".join(f"{seed % 10 + size - i}\n" for i in range(size)))

    if MODE == "invalid":
        gen.handle("materialize", lambda request: {"dataset": {"manifest": "never-written.json"}})
    return gen


def transformer() -> Transformer:
    xform = Transformer()

    @xform.transform
    def derive(source_dir: str, parameters: dict, seed: int, output_dir: str) -> None:
        with open(os.path.join(source_dir, "values.txt")) as fh:
            values = sorted(int(line) for line in fh)
        factor = int(parameters.get("factor", 1))
        with open(os.path.join(output_dir, "values.txt"), "w") as fh:
            fh.write("".join(f"{v * factor}\n" for v in values))
        if MODE == "modify_source":
            with open(os.path.join(source_dir, "values.txt"), "a") as fh:
                fh.write("0\n")

    return xform


if __name__ == "__main__":
    role = {"gen": generator, "xform": transformer}[sys.argv[1]]
    raise SystemExit(role().serve())
