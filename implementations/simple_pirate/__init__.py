"""Simple Pirate (ZeroMQ guide ch. 4): load-balancing queue and REQ workers, no heartbeats."""
