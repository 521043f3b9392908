"""Majordomo 0.1 (7/MDP + 8/MMI): broker and echo worker (see broker.py, worker.py)."""
