#!/bin/sh
# A start script that runs the server immune to hang-ups in the background and exits.
nohup "$@" &
exit 0
