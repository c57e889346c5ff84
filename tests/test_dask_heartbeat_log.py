"""A lost scheduler is one line in the run's output, not distributed's stack
(``runtime.dask_worker.HeartbeatLossWithoutStack``): a worker's heartbeat that meets a closing
scheduler, and a batched send (client's or worker's) that meets a killed one. Other records keep
their stack."""

from __future__ import annotations

import io
import logging

from distributed.comm.core import CommClosedError

from metewand.runtime.dask_worker import (
    BATCHED_COMM_CLOSED,
    HEARTBEAT_LOSS,
    STACKED_LOSS_LOGGERS,
    quiet_heartbeat_loss,
)


def _logged(logger_name: str, message: str, error: Exception, level: int = logging.ERROR) -> str:
    logger = logging.getLogger(logger_name)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        try:
            raise error
        except type(error):
            logger.log(level, message, exc_info=True)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    return stream.getvalue()


def test_a_lost_heartbeat_is_one_line_and_other_errors_keep_their_stack() -> None:
    quiet_heartbeat_loss()
    quiet_heartbeat_loss()  # once per process, however many runs register the plugin
    for name in STACKED_LOSS_LOGGERS:
        filters = logging.getLogger(name).filters
        assert sum(type(f).__name__ == "HeartbeatLossWithoutStack" for f in filters) == 1
    lost = _logged("distributed.worker", f"{HEARTBEAT_LOSS}.", OSError("Stream is closed"))
    assert lost == f"{HEARTBEAT_LOSS}.\n"
    other = _logged(
        "distributed.worker",
        "Unexpected exception during heartbeat. Closing worker.",
        OSError("Stream is closed"),
    )
    assert "Traceback" in other and "OSError: Stream is closed" in other


def test_a_batched_send_to_a_killed_scheduler_is_one_line() -> None:
    """distributed logs it at INFO with the stack (ci179's client, after the scheduler's kill)."""
    quiet_heartbeat_loss()
    comm = "<TCP (closed) Client->Scheduler local=tcp://127.0.0.1:1 remote=tcp://127.0.0.1:2>"
    message = f"{BATCHED_COMM_CLOSED} {comm}"
    lost = _logged("distributed.batched", message, CommClosedError(), logging.INFO)
    assert lost == f"{message}\n"
    other = _logged("distributed.batched", "Error in batched write", ValueError("bad frame"))
    assert "Traceback" in other and "ValueError: bad frame" in other
