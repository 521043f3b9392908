#!/bin/sh
# A start script that becomes the server.
exec "$@"
