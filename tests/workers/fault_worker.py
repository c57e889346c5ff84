"""Test worker with injectable faults. argv[1]: impl | eval | gen; METEWAND_TEST_MODE picks the fault.

Modes: ok, delay (prepare 100 ms, execute 100 ms + 50 ms result writing, evaluate 250 ms),
burn (CPU, not sleep: prepare 200 ms, execute 100 ms, evaluate 50 ms of the thread's own CPU),
memory (prepare fills 96 MiB and frees it, execute fills 24 MiB and frees it),
crash (exit 17 in execute), hang (execute never answers; a child process sleeps too), garbage
(non-JSON line), oversized (a 2 MiB line), wrong_protocol (hello picks protocol 2),
eval_crash (the evaluator exits 3 in evaluate).

With ``METEWAND_TEST_CPU_LOG`` set, the worker also keeps the process CPU each request's handling
used and appends it to that file as JSON lines when it is asked to shut down (after every measured
phase, so the writing is in none of them).
"""

import json
import os
import subprocess
import sys
import time

from metewand.worker import WRITE_FD_ENV, Evaluator, Implementation, Materializer, Worker

MODE = os.environ.get("METEWAND_TEST_MODE", "ok")


def burn(seconds: float) -> None:
    """Spin until this thread has used ``seconds`` of CPU (wall may be longer on a busy host)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


MIB = 1 << 20
MEMORY_MIB = {"prepare": 96, "execute": 24}


def fill(mib: int) -> None:
    """Touch ``mib`` MiB (every page written), hold it for a moment, and free it again."""
    block = b"\x01" * (mib * MIB)
    time.sleep(0.02)
    del block


def raw(data: bytes) -> None:
    fd = int(os.environ[WRITE_FD_ENV])
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def implementation() -> Implementation:
    impl = Implementation()

    @impl.prepare
    def prepare(request: dict) -> dict:
        if MODE == "delay":
            time.sleep(0.100)
        elif MODE == "burn":
            burn(0.200)
        elif MODE == "memory":
            fill(MEMORY_MIB["prepare"])
        return request

    @impl.execute
    def execute(state: dict, result_dir: str) -> dict:
        if MODE == "delay":
            time.sleep(0.100)
        elif MODE == "burn":
            burn(0.100)
        elif MODE == "memory":
            fill(MEMORY_MIB["execute"])
        elif MODE == "crash":
            os._exit(17)
        elif MODE == "hang":
            child = subprocess.Popen(["sleep", "60"])
            with open("hang-child.pid", "w") as fh:
                fh.write(str(child.pid))
            time.sleep(60)
        elif MODE == "garbage":
            raw(b"this is not json\n")
            time.sleep(60)
        elif MODE == "oversized":
            raw(b'{"id":"x","pad":"' + b"a" * (2 << 20) + b'"}\n')
            time.sleep(60)
        with open(os.path.join(result_dir, "answer.txt"), "w") as fh:
            fh.write("42\n")
        if MODE == "delay":
            time.sleep(0.050)  # result writing belongs to the execute request
        return {"answer": 42}

    if MODE == "wrong_protocol":
        original = impl._hello

        def hello(rid: str, request: dict) -> dict:
            return {**original(rid, request), "protocol": 2}

        impl._hello = hello  # type: ignore[method-assign]
    return impl


def evaluator() -> Evaluator:
    ev = Evaluator()

    @ev.evaluate
    def evaluate(request: dict, result: dict) -> dict:
        if MODE == "delay":
            time.sleep(0.250)
        elif MODE == "burn":
            burn(0.050)
        if MODE == "eval_crash":
            os._exit(3)
        return {"correct": result["data"].get("answer") == 42}

    return ev


def materializer() -> Materializer:
    gen = Materializer()

    @gen.materialize
    def build(parameters: dict, seed: int, output_dir: str) -> None:
        with open(os.path.join(output_dir, "values.txt"), "w") as fh:
            fh.write(f"{parameters.get('size', 1)} {seed}\n")

    return gen


def record_request_cpu(worker: Worker, path: str) -> None:
    """Time each request's handling on the process CPU clock; write the figures at shutdown."""
    original = worker._dispatch
    used: list[dict] = []

    def dispatch(request: dict) -> dict:
        if request.get("method") == "shutdown":
            with open(path, "a") as fh:
                fh.writelines(json.dumps({"role": sys.argv[1], **u}) + "\n" for u in used)
        start = time.process_time_ns()
        response = original(request)
        used.append({"method": request.get("method"), "cpu_ns": time.process_time_ns() - start})
        return response

    worker._dispatch = dispatch  # type: ignore[method-assign]


if __name__ == "__main__":
    role = {"impl": implementation, "eval": evaluator, "gen": materializer}[sys.argv[1]]
    worker = role()
    if os.environ.get("METEWAND_TEST_CPU_LOG"):
        record_request_cpu(worker, os.environ["METEWAND_TEST_CPU_LOG"])
    raise SystemExit(worker.serve())
