"""A test subject: listens on 127.0.0.1:PORT, appends its pid to PIDFILE, then serves
until killed (each connection gets the server's pid and is closed)."""

import os
import socket
import sys

port, pidfile = int(sys.argv[1]), sys.argv[2]
server = socket.create_server(("127.0.0.1", port))
with open(pidfile, "a") as fh:
    fh.write(f"{os.getpid()}\n")
print("listening", flush=True)
while True:
    conn, _ = server.accept()
    conn.sendall(str(os.getpid()).encode())
    conn.close()
