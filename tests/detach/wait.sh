#!/bin/sh
# A start script that runs the server as its child and waits for it.
"$@"
