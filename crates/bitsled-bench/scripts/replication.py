"""Replication figures of a bitsled master and replica against a Redis
master and replica, in one run:

- full sync: KEYS keys of 10^9 bits each (random bytes, 125 MB a key)
  on the master; a fresh replica is started and told REPLICAOF; the time
  until its INFO says the link is up and no sync is in progress, and the
  rate in MB of values per second;
- lag under load: `redis-benchmark -P 16 -c 50` SETBIT into 10^7 keys
  (one per user) on the master for SECONDS; meanwhile a probe sets bit
  i of key `probe` on the master every 50 ms and polls the replica (every
  millisecond) until it reads it: the time it took, p50, p99 and max;
  and the master's SETBIT rate meanwhile (bitsled also without a replica);
- failover: a master, two replicas and three Sentinels (`redis-server
  --sentinel`, down-after-milliseconds 1000, quorum 2); the master is
  killed with SIGKILL; the time until the Sentinels name a new master.

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
import signal

from loopback import start_server, wait_for

KEY_BYTES = 125_000_000
CHUNK = 1 << 20


def start(kind, binary, port, d):
    return start_server("redis" if kind == "redis" else binary, port, d)


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


def commands(con):
    return int(con.info("stats")["total_commands_processed"])


def failover(kind, binary, base_port):
    ports = [base_port + i for i in range(3)]
    sports = [base_port + 10 + i for i in range(3)]
    with tempfile.TemporaryDirectory() as d:
        procs = []
        try:
            for i, p in enumerate(ports):
                os.makedirs(os.path.join(d, str(i)))
                procs.append(start(kind, binary, p, os.path.join(d, str(i))))
            for p in ports[1:]:
                redis.Redis(port=p).replicaof("127.0.0.1", ports[0])
            for sp in sports:
                conf = os.path.join(d, f"s{sp}.conf")
                with open(conf, "w") as f:
                    f.write(f"port {sp}\nbind 127.0.0.1\ndir {d}\nsentinel monitor m 127.0.0.1 {ports[0]} 2\n"
                            "sentinel down-after-milliseconds m 1000\nsentinel failover-timeout m 5000\n")
                procs.append(subprocess.Popen(["redis-server", conf, "--sentinel"], stdout=subprocess.DEVNULL,
                                              stderr=subprocess.DEVNULL))
            for sp in sports:
                wait_for(sp)
            s = redis.Redis(port=sports[0], decode_responses=True)
            while True:
                m = s.sentinel_master("m")
                if m.get("num-slaves") == 2 and m.get("num-other-sentinels") == 2:
                    break
                time.sleep(0.1)
            procs[0].send_signal(signal.SIGKILL)
            procs[0].wait()
            t0 = time.time()
            while s.sentinel_get_master_addr_by_name("m")[1] == ports[0]:
                time.sleep(0.01)
            return time.time() - t0
        finally:
            for p in procs:
                p.kill()
                p.wait()


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
            c0, t_start = commands(m), time.time()
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
            rate = (commands(m) - c0) / (time.time() - t_start)
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
                "setbit_per_s": rate,
                "master_offset": mi.get("master_repl_offset"),
            }
        finally:
            for p in (master, replica):
                p.terminate()
                p.wait()


def alone_rate(binary, seconds, port):
    """bitsled's SETBIT rate under the same load with no replica."""
    with tempfile.TemporaryDirectory() as d:
        p = start("bitsled", binary, port, d)
        try:
            m = redis.Redis(port=port)
            load = subprocess.Popen(
                ["redis-benchmark", "-p", str(port), "-q", "-P", "16", "-c", "50", "-r", "10000000",
                 "-n", "100000000", "setbit", "sign:__rand_int__", "17", "1"],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            time.sleep(1)
            c0, t0 = commands(m), time.time()
            time.sleep(seconds)
            rate = (commands(m) - c0) / (time.time() - t0)
            load.terminate()
            load.wait()
            return rate
        finally:
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
        rows[kind]["failover_s"] = failover(kind, a.binary, 17701 + 20 * n)
        print(kind, rows[kind], flush=True)
    alone = alone_rate(a.binary, a.seconds, 17651)
    print("bitsled without a replica: SETBIT/s", alone, flush=True)
    print()
    print(f"| measurement ({a.keys} keys of 10^9 bits; SETBIT load for {a.seconds} s) | bitsled | Redis | ratio |")
    print("|---|---|---|---|")
    b, r = rows["bitsled"], rows["redis"]
    for label, k in [("full sync, s", "sync_s"), ("full sync, MB/s", "sync_mb_s"), ("lag p50, ms", "lag_p50_ms"),
                     ("lag p99, ms", "lag_p99_ms"), ("lag max, ms", "lag_max_ms"),
                     ("master SETBIT/s during the lag probe", "setbit_per_s"),
                     ("Sentinel failover (kill to new master), s", "failover_s")]:
        print(f"| {label} | {b[k]:.1f} | {r[k]:.1f} | {b[k] / r[k]:.2f}x |")
    print(f"| bitsled SETBIT/s with no replica | {alone:.0f} | | with a replica: {b['setbit_per_s'] / alone:.2f}x |")


if __name__ == "__main__":
    main()
