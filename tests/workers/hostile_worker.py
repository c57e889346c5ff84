"""Test worker that attacks the orchestrator. argv[1]: impl | eval | gen; METEWAND_TEST_MODE
picks the attack; METEWAND_TEST_PIDS (optional) names a file where every daemon it leaves appends
its pid, so a test can check that none outlives the run.

Modes:
  fifo_result      execute answers with a result manifest that is a named pipe
  symlink_result   execute answers with a result manifest that is a symlink to a real file
  symlink_result_dir  the result directory itself is swapped for a symlink to a real directory
  fifo_metrics     (eval) the metrics file is a named pipe
  daemon_exit      execute starts a setsid daemon holding the protocol pipe, then the worker exits
  daemon           (eval / gen) a setsid grandchild that sleeps, then the normal answer
  hang_once        the first execute (of all runs using this METEWAND_TEST_PIDS) leaves a setsid
                   daemon and never answers; later ones answer normally
  ok               the normal answer
"""

import contextlib
import os
import subprocess
import sys
import time

from metewand.worker import RESULT_MANIFEST, Evaluator, Implementation, Materializer

MODE = os.environ.get("METEWAND_TEST_MODE", "ok")


def leave_daemon(hold_fds: tuple[int, ...] = ()) -> None:
    """A grandchild in a new session (so no process-group kill reaches it) that sleeps."""
    child = subprocess.Popen(
        ["sleep", "120"],
        start_new_session=True,
        pass_fds=hold_fds,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    record = os.environ.get("METEWAND_TEST_PIDS")
    if record:
        with open(record, "a") as fh:
            fh.write(f"{child.pid}\n")


def implementation() -> Implementation:
    impl = Implementation()

    @impl.execute
    def execute(state: dict, result_dir: str) -> dict:
        return {"answer": 42}

    plain = impl._handlers["execute"]

    def hostile_execute(request: dict) -> dict:
        manifest = os.path.join(request["result_dir"], RESULT_MANIFEST)
        if MODE == "fifo_result":
            os.mkfifo(manifest)
            return {"result": {"manifest": RESULT_MANIFEST}, "implementation_time_ns": None}
        if MODE == "symlink_result":
            reply = plain(request)
            os.rename(manifest, manifest + ".real")
            os.symlink(manifest + ".real", manifest)
            return reply
        flag = os.environ.get("METEWAND_TEST_PIDS", "") + ".hung"
        if MODE == "hang_once" and not os.path.exists(flag):
            open(flag, "w").close()
            leave_daemon()
            time.sleep(600)
        if MODE == "symlink_result_dir":  # the whole result dir becomes a link to elsewhere
            result_dir = request["result_dir"]
            elsewhere = result_dir + ".elsewhere"
            os.rename(result_dir, elsewhere)
            os.symlink(elsewhere, result_dir)
            return plain(request)
        if MODE == "close_protocol_live":  # ends its protocol stream, runs on
            for key in [k for k in os.environ if k.startswith("METEWAND_PROTOCOL")]:
                with contextlib.suppress(OSError, ValueError):
                    os.close(int(os.environ[key]))
            time.sleep(600)
        if MODE == "daemon_exit":
            fds = tuple(int(os.environ[k]) for k in os.environ if k.startswith("METEWAND_PROTOCOL"))
            leave_daemon(fds)
            os._exit(0)
        return plain(request)

    impl.handle("execute", hostile_execute)
    return impl


def evaluator() -> Evaluator:
    ev = Evaluator()

    @ev.evaluate
    def evaluate(request: dict, result: dict) -> dict:
        return {"correct": True}

    plain = ev._handlers["evaluate"]

    def hostile_evaluate(request: dict) -> dict | None:
        if MODE == "fifo_metrics":
            os.mkfifo(request["metrics_path"])
            return None
        if MODE == "daemon":
            leave_daemon()
        return plain(request)

    ev.handle("evaluate", hostile_evaluate)
    return ev


def materializer() -> Materializer:
    gen = Materializer()

    @gen.materialize
    def build(parameters: dict, seed: int, output_dir: str) -> None:
        if MODE == "daemon":
            leave_daemon()
        with open(os.path.join(output_dir, "values.txt"), "w") as fh:
            fh.write(f"{seed}\n")

    return gen


if __name__ == "__main__":
    role = {"impl": implementation, "eval": evaluator, "gen": materializer}[sys.argv[1]]
    raise SystemExit(role().serve())
