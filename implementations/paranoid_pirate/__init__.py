"""Paranoid Pirate (6/PPP): a load-balancing queue with heartbeats both ways, and
workers that detect a dead queue and reconnect with exponential back-off.

Choices where the guide's reference examples are silent or buggy:
- A request or reply may carry several body frames and any address stack (the reference
  worker only accepts exactly three frames).
- A malformed message (no empty delimiter, no body, an unknown one-frame command) is
  logged, recorded as ``malformed`` and dropped; it still counts as a sign of life of
  its sender, because only a live peer can send anything.
- The queue expires a silent worker whether it is idle or busy (the reference forgets busy
  workers, so one cut off with a request in hand would never be reported expired).
- A worker's socket identity is ``<name>-<4 hex>``, new on every reconnect, so the queue
  never confuses a reconnected worker with its dead predecessor, and the history can
  still tell which instance it is.
"""
