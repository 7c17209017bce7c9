"""What the benchmark scripts share: starting a server on a loopback
port and waiting for it."""
import os
import socket
import subprocess
import time


def wait_for(port, tries=400):
    """Returns once something accepts connections on 127.0.0.1:port; exits
    the script if nothing does within tries x 50 ms."""
    for _ in range(tries):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on port {port}")


def start_server(server, port, d):
    """Starts redis-server (`server` == "redis", no persistence) or the
    bitsled binary `server` on 127.0.0.1:port with its files in `d`;
    returns the process once it accepts connections."""
    if server == "redis":
        args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", d]
    else:
        args = [server, "--db", os.path.join(d, "db"), "serve", "--port", str(port)]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(port)
    return p
