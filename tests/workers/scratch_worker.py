"""Implementation that writes a scratch file of METEWAND_SCRATCH_MB MiB in 1 MiB chunks during
execute (so its own resident memory stays small while the kernel charges the page cache to its
tree) and reports its own VmHWM, read from /proc/self/status just before it answers."""

import os

from metewand.worker import Implementation

impl = Implementation()
CHUNK = b"\xa5" * (1 << 20)


def own_vm_hwm_bytes() -> int:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


@impl.execute
def execute(state: object, result_dir: str) -> tuple[dict, dict]:
    path = os.path.join(os.getcwd(), "scratch.bin")
    with open(path, "wb") as fh:
        for _ in range(int(os.environ.get("METEWAND_SCRATCH_MB", "150"))):
            fh.write(CHUNK)
    os.unlink(path)  # the cached pages were charged while the file existed
    return {"answer": 42}, {"vm_hwm_bytes": own_vm_hwm_bytes()}


if __name__ == "__main__":
    raise SystemExit(impl.serve())
