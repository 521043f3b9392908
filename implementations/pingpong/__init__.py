"""The PING/PONG worker/broker dialogue of ``seeds/pingpong-dialogue.txt`` (broker, worker)."""
