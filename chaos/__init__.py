"""Faults: one card per fault kind (``chaos/kinds/``), the nemesis that carries out a seeded
plan, CPU starvation, the Toxiproxy client and the embedded Toxiproxy-compatible server."""
