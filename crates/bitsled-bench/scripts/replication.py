"""Replication figures of a bitsled master and replica against a Redis
master and replica, in one run:

- full sync: KEYS keys of 10^9 bits each (random bytes, 125 MB a key)
  on the master; a fresh replica is started and told REPLICAOF; the time
  until its INFO says the link is up and no sync is in progress, and the
  rate in MB of values per second;
- lag under load: `redis-benchmark -P 16 -c 50` SETBIT into 10^7 keys
  (one per user) on the master for SECONDS; meanwhile a probe sets bit
  i of key `probe` on the master every 50 ms and polls the replica (every
  millisecond) until it reads it: the time it took, p50, p99 and max.

    /usr/bin/python3 replication.py BITSLED_BINARY [--keys N] [--seconds S]

Needs redis-server, redis-benchmark and redis-py; uses loopback ports
17601 on.
"""
import argparse
import os
import statistics
import subprocess
import tempfile
import threading
import time

import redis

from loopback import wait_for

KEY_BYTES = 125_000_000
CHUNK = 1 << 20


def start(kind, binary, port, d, master_port=None):
    if kind == "redis":
        args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                "--dir", d]
    else:
        args = [binary, "--db", os.path.join(d, "db"), "serve", "--port", str(port)]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(port)
    return p


def info(con):
    return con.info("replication")


def fill(con, keys):
    rnd = os.urandom(CHUNK)
    for k in range(keys):
        pipe = con.pipeline(transaction=False)
        for off in range(0, KEY_BYTES, CHUNK):
            n = min(CHUNK, KEY_BYTES - off)
            # A different chunk per position: rotate the random block.
            r = (off // CHUNK) % CHUNK
            pipe.setrange(f"big:{k}", off, (rnd[r:] + rnd[:r])[:n])
            if len(pipe) >= 16:
                pipe.execute()
        pipe.execute()


def synced(con):
    i = info(con)
    return i.get("master_link_status") == "up" and int(i.get("master_sync_in_progress", 1)) == 0


def measure(kind, binary, keys, seconds, base_port):
    mp, rp = base_port, base_port + 1
    with tempfile.TemporaryDirectory() as md, tempfile.TemporaryDirectory() as rd:
        master = start(kind, binary, mp, md)
        replica = start(kind, binary, rp, rd)
        try:
            m = redis.Redis(port=mp)
            r = redis.Redis(port=rp)
            fill(m, keys)
            t0 = time.time()
            r.replicaof("127.0.0.1", mp)
            while not synced(r):
                time.sleep(0.01)
            sync_s = time.time() - t0
            # The lag under a SETBIT load.
            load = subprocess.Popen(
                ["redis-benchmark", "-p", str(mp), "-q", "-P", "16", "-c", "50", "-r", "10000000",
                 "-n", "100000000", "setbit", "sign:__rand_int__", "17", "1"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            lags = []
            end = time.time() + seconds
            i = 0
            while time.time() < end:
                i += 1
                t = time.time()
                m.setbit("probe", i, 1)
                while r.getbit("probe", i) != 1:
                    time.sleep(0.001)
                lags.append(time.time() - t)
                time.sleep(0.05)
            load.terminate()
            load.wait()
            mi = info(m)
            lags.sort()
            return {
                "sync_s": sync_s,
                "sync_mb_s": keys * KEY_BYTES / 1e6 / sync_s,
                "lag_p50_ms": 1000 * statistics.median(lags),
                "lag_p99_ms": 1000 * lags[int(0.99 * (len(lags) - 1))],
                "lag_max_ms": 1000 * lags[-1],
                "probes": len(lags),
                "master_offset": mi.get("master_repl_offset"),
            }
        finally:
            for p in (master, replica):
                p.terminate()
                p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--keys", type=int, default=2)
    ap.add_argument("--seconds", type=int, default=20)
    a = ap.parse_args()
    rows = {}
    for n, kind in enumerate(["redis", "bitsled"]):
        rows[kind] = measure(kind, a.binary, a.keys, a.seconds, 17601 + 10 * n)
        print(kind, rows[kind], flush=True)
    print()
    print(f"| measurement ({a.keys} keys of 10^9 bits; SETBIT load for {a.seconds} s) | bitsled | Redis | ratio |")
    print("|---|---|---|---|")
    b, r = rows["bitsled"], rows["redis"]
    for label, k in [("full sync, s", "sync_s"), ("full sync, MB/s", "sync_mb_s"), ("lag p50, ms", "lag_p50_ms"),
                     ("lag p99, ms", "lag_p99_ms"), ("lag max, ms", "lag_max_ms")]:
        print(f"| {label} | {b[k]:.1f} | {r[k]:.1f} | {b[k] / r[k]:.2f}x |")


if __name__ == "__main__":
    main()
