"""The measurement layer: forms, /proc and cgroup accounting, PSS scans, samplers, host telemetry.

Nothing here knows about runs, tasks or browsers; it imports nothing above itself.
"""
