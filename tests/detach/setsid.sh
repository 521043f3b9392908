#!/bin/sh
# A start script that runs the server in a session of its own and exits at once.
setsid "$@" &
exit 0
