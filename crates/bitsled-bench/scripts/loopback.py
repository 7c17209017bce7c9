"""What the benchmark scripts share: waiting for a server on a loopback
port."""
import socket
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
