"""A worker's heartbeat that meets a closing scheduler is one line in the run's output, not
distributed's stack (``runtime.dask_worker.HeartbeatLossWithoutStack``); other records keep theirs."""

from __future__ import annotations

import io
import logging

from metewand.runtime.dask_worker import HEARTBEAT_LOSS, quiet_heartbeat_loss


def _logged(message: str) -> str:
    logger = logging.getLogger("distributed.worker")
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    try:
        try:
            raise OSError("Stream is closed")
        except OSError:
            logger.exception(message)
    finally:
        logger.removeHandler(handler)
    return stream.getvalue()


def test_a_lost_heartbeat_is_one_line_and_other_errors_keep_their_stack() -> None:
    quiet_heartbeat_loss()
    quiet_heartbeat_loss()  # once per process, however many runs register the plugin
    filters = logging.getLogger("distributed.worker").filters
    assert sum(type(f).__name__ == "HeartbeatLossWithoutStack" for f in filters) == 1
    lost = _logged(f"{HEARTBEAT_LOSS}.")
    assert lost == f"{HEARTBEAT_LOSS}.\n"
    other = _logged("Unexpected exception during heartbeat. Closing worker.")
    assert "Traceback" in other and "OSError: Stream is closed" in other
