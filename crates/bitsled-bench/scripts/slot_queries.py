"""Times CLUSTER COUNTKEYSINSLOT and GETKEYSINSLOT on one cluster-mode node
holding N monthly sign-in keys, for each bitsled binary given and for
redis-server (from PATH), in one run. Each node owns every slot; the keys
are loaded with `redis-cli --pipe`; 200 random slots are asked (the same
ones of every server). Prints the load time, the median and p99 latency of
each command, and a sum of counts over every 997th slot (equal for every
server when they agree).

    python3 slot_queries.py N [BITSLED_BINARY ...]

Needs redis-py, redis-cli and redis-server; uses loopback ports 17401 on.
"""
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

from loopback import wait_for

import redis


def start_redis(port, d):
    p = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--cluster-enabled", "yes", "--cluster-config-file", os.path.join(d, "nodes.conf"), "--dir", d],
        stdout=subprocess.DEVNULL)
    wait_for(port)
    r = redis.Redis(port=port)
    r.execute_command("CLUSTER ADDSLOTSRANGE", 0, 16383)
    while r.execute_command("CLUSTER INFO").get("cluster_state") != "ok":
        time.sleep(0.1)
    return p, r


def start_bitsled(binary, port, d):
    log = open(os.path.join(d, "log"), "w")
    p = subprocess.Popen([binary, "--db", os.path.join(d, "db"), "serve", "--port", str(port),
                          "--cluster-enabled", "yes"], stdout=subprocess.DEVNULL, stderr=log)
    wait_for(port)
    subprocess.run([binary, "cluster", "create", f"127.0.0.1:{port}"], check=True, stdout=subprocess.DEVNULL)
    return p, redis.Redis(port=port)


def latencies(r, slots, *args):
    ts = []
    for s in slots:
        t = time.perf_counter()
        r.execute_command(*args[:1], s, *args[1:])
        ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[len(ts) // 2] * 1e6, ts[int(len(ts) * 0.99)] * 1e6


def main():
    n = int(sys.argv[1])
    tmp = tempfile.mkdtemp(dir=os.getcwd())
    load = os.path.join(tmp, "load.resp")
    with open(load, "wb") as f:
        for i in range(n):
            k, o = f"uid:sign:{i}:202611".encode(), b"%d" % (i % 30)
            f.write(b"*4\r\n$6\r\nSETBIT\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$1\r\n1\r\n" % (len(k), k, len(o), o))
    random.seed(7)
    slots = [random.randrange(16384) for _ in range(200)]
    servers = [(os.path.basename(b), b) for b in sys.argv[2:]] + [("redis", None)]
    try:
        for port, (label, binary) in enumerate(servers, start=17401):
            d = os.path.join(tmp, str(port))
            os.makedirs(d)
            p, r = start_redis(port, d) if binary is None else start_bitsled(binary, port, d)
            try:
                t = time.perf_counter()
                with open(load, "rb") as f:
                    subprocess.run(["redis-cli", "-p", str(port), "--pipe"], stdin=f, check=True,
                                   stdout=subprocess.DEVNULL)
                loaded = time.perf_counter() - t
                assert r.dbsize() == n, r.dbsize()
                count = latencies(r, slots, "CLUSTER COUNTKEYSINSLOT")
                get = latencies(r, slots, "CLUSTER GETKEYSINSLOT", 100)
                total = sum(r.execute_command("CLUSTER COUNTKEYSINSLOT", s) for s in range(0, 16384, 997))
                print(f"{label}: load {loaded:.2f} s; COUNTKEYSINSLOT median {count[0]:.0f} us, p99 {count[1]:.0f} us; "
                      f"GETKEYSINSLOT s 100 median {get[0]:.0f} us, p99 {get[1]:.0f} us; sampled count {total}",
                      flush=True)
            finally:
                p.terminate()
                p.wait()
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
