"""``python -m chaos.toxiproxy_server``: the Toxiproxy-compatible server."""

import sys

from chaos.toxiproxy_server import main

sys.exit(main())
