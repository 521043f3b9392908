"""Orchestration: scenario and manifest models, ports, the process supervisor, the
history writer, the runner and the command line."""
