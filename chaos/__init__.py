"""Faults: process killer, freezer, CPU starvation, network faults through a
Toxiproxy-compatible proxy, and the seeded fault schedule (the nemesis)."""
