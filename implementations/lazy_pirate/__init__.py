"""Lazy Pirate (ZeroMQ guide ch. 4): the echo server its clients retry against."""
