"""Orchestration, the top layer: the scenario and manifest readers, the topology, the
process supervisor, the runner, many seeds, replay, shrink, the suite and the command line."""
