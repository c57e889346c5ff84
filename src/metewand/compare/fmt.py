"""Text for numbers in reports: every rate with its counts, every missing value with its reason."""

from __future__ import annotations

from typing import Any

UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def unavailable(reason: str) -> str:
    return f"unavailable ({reason})"


def rate_text(passed: int, total: int, share: float | None = None) -> str:
    """``97.3% (373/375)``; never a bare 0 when nothing was counted."""
    if not total:
        return unavailable("no attempts")
    value = share if share is not None else passed / total
    return f"{value * 100:.1f}% ({passed}/{total})"


def bytes_text(value: float | None, reason: str = "not measured") -> str:
    if value is None:
        return unavailable(reason)
    size = float(value)
    for unit in UNITS:
        if abs(size) < 1024 or unit == UNITS[-1]:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"  # pragma: no cover - loop always returns


def ms_text(value: float | None, reason: str = "not measured") -> str:
    if value is None:
        return unavailable(reason)
    return f"{value:.0f} ms" if value >= 100 else f"{value:.2f} ms"


def ns_text(value: float | None, reason: str = "not measured") -> str:
    if value is None:
        return unavailable(reason)
    return ms_text(value / 1e6)


def form_text(form: Any, unit: str = "ns") -> str:
    """A measurement wire form as text: value (status), or unavailable (reason)."""
    if not isinstance(form, dict):
        return unavailable("absent")
    status = form.get("status")
    value = form.get("value")
    if status == "unavailable" or value is None:
        return unavailable(str(form.get("reason", "no reason recorded")))
    shown = bytes_text(value) if unit == "bytes" else ns_text(value) if unit == "ns" else str(value)
    if status == "partial":
        return f"{shown} (partial: {form.get('reason')})"
    return shown
