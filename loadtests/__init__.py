"""Load: the Locust user that records the history, one client adapter per protocol."""
