"""Freelance (ZeroMQ guide ch. 4, 10/FLP): brokerless reliability, clients that talk to
several servers directly (the server here; the model 3 client is loadtests/adapters/freelance.py)."""
