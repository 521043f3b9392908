"""A classic double-fork daemon: fork, the parent exits; setsid; fork again, the middle
process exits; the grandchild (no session leader, re-parented) runs ARGV."""

import os
import sys

if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
os.execvp(sys.argv[1], sys.argv[1:])
