"""Implementation: a pure-Python in-place heapsort."""

from common import read_values, write_sorted

from metewand.worker import Implementation

impl = Implementation()


def sift_down(a: list[int], start: int, end: int) -> None:
    root = start
    while (child := 2 * root + 1) <= end:
        if child + 1 <= end and a[child] < a[child + 1]:
            child += 1
        if a[root] >= a[child]:
            return
        a[root], a[child] = a[child], a[root]
        root = child


def heapsort(a: list[int]) -> list[int]:
    for start in range(len(a) // 2 - 1, -1, -1):
        sift_down(a, start, len(a) - 1)
    for end in range(len(a) - 1, 0, -1):
        a[0], a[end] = a[end], a[0]
        sift_down(a, 0, end - 1)
    return a


@impl.prepare
def load(request: dict) -> list[int]:
    return read_values(request["dataset_dir"])


@impl.execute
def run(values: list[int], result_dir: str) -> tuple[dict, dict]:
    out = heapsort(list(values))
    write_sorted(result_dir, out)
    return {"count": len(out)}, {"algorithm": "heapsort"}


if __name__ == "__main__":
    raise SystemExit(impl.serve())
