"""What a failed host pollution gate means for the metrics a comparison judges.

Foreign CPU load and CPU pressure stretch wall time (the measured program waits for a CPU) but
leave its own CPU time nearly alone; swapping and memory pressure make the program itself do
more work (reclaim, page faults), so they make CPU time unreliable too. A gate that was not
evaluated (telemetry off) says nothing either way, and is reported as unknown, not as clean.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

WALL, CPU, MEMORY, OTHER = "wall", "cpu", "memory", "other"
# which metric families each gate condition makes unreliable
SPOILS: dict[str, tuple[str, ...]] = {
    "foreign_cpu_load": (WALL,),
    "sustained_cpu_pressure": (WALL,),
    "sustained_io_pressure": (WALL,),
    "abnormal_process_growth": (WALL,),
    "swap_activity": (WALL, CPU, MEMORY),
    "sustained_memory_pressure": (WALL, CPU, MEMORY),
    "low_memory_available": (WALL, CPU, MEMORY),
}


def gate_of(host_summary: Mapping[str, Any] | None) -> dict[str, Any]:
    """``{passed, conditions: [{condition, detail}]}``; passed None when the run has no gate."""
    gate = (host_summary or {}).get("gate")
    if not isinstance(gate, Mapping):
        return {"passed": None, "conditions": []}
    triggered = [
        {"condition": str(t.get("condition")), "detail": str(t.get("detail", ""))}
        for t in gate.get("triggered") or []
        if isinstance(t, Mapping)
    ]
    passed = gate.get("passed")
    return {"passed": passed if isinstance(passed, bool) else None, "conditions": triggered}


def account(runs: Sequence[tuple[str, str, Mapping[str, Any] | None]]) -> dict[str, Any]:
    """Per run ``(side, run_id, host_summary)``: its gate; and the metric families a failed gate
    made unreliable, over all runs of the comparison."""
    out = []
    spoiled: set[str] = set()
    for side, run_id, summary in runs:
        gate = gate_of(summary)
        out.append({"side": side, "run_id": run_id, **gate})
        if gate["passed"] is False:
            spoiled.add(WALL)
            for condition in gate["conditions"]:
                spoiled.update(SPOILS.get(condition["condition"], (WALL,)))
    return {"runs": out, "unreliable": sorted(spoiled)}


def polluted_runs_text(pollution: Mapping[str, Any]) -> list[str]:
    """One line per polluted run naming its side, id and the gate's conditions."""
    lines = []
    for run in pollution["runs"]:
        if run["passed"] is False:
            conditions = "; ".join(
                f"{c['condition']} ({c['detail']})" if c["detail"] else c["condition"]
                for c in run["conditions"]
            )
            lines.append(f"{run['side']} run {run['run_id']}: {conditions or 'gate failed'}")
    return lines


def statement(pollution: Mapping[str, Any]) -> str | None:
    """Which metric family the host made unreliable, for the report's head (None: none)."""
    spoiled = pollution["unreliable"]
    if not spoiled:
        return None
    if CPU in spoiled:
        return (
            "the host made both wall time and CPU time unreliable (memory pressure or swap "
            "in a run): treat every time figure with care"
        )
    return (
        "the host made wall time unreliable (a run's pollution gate failed): CPU time is "
        "the figure to judge"
    )
