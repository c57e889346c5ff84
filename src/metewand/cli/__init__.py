"""Command-line interface: commands, progress, exit codes."""
