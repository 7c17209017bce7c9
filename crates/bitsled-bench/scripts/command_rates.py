"""Requests per second of single commands, `redis-benchmark` against each
bitsled binary given and against redis-server (from PATH), in one run.

Every command runs twice per server: pipelined (`-P 16`) and not (`-P 1`),
50 clients, random arguments from `-r 1000000`. The servers run one at a
time, each on a fresh directory, in the order given, and the whole set is
repeated ROUNDS times, alternating servers; the table shows each server's
median and the ratio of each bitsled build to Redis.

Redis (Debian's 7.0) has no BF.* commands without the RedisBloom module,
so the Bloom rows compare with the nearest built-in set commands (SADD,
SISMEMBER of one member into per-user sets), and say so.

    python3 command_rates.py [--rounds N] [--requests N] BITSLED_BINARY...

Needs redis-server and redis-benchmark; uses loopback ports 17501 on.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import tempfile

from loopback import start_server

# (row label, bitsled command, Redis command or None if the same)
COMMANDS = [
    ("SET", "set key:__rand_int__ xxx", None),
    ("GET", "get key:__rand_int__", None),
    ("INCR", "incr counter:__rand_int__", None),
    ("SETBIT (a key per user)", "setbit sign:__rand_int__ 17 1", None),
    ("GETBIT (a key per user)", "getbit sign:__rand_int__ 17", None),
    ("BITCOUNT (one 16 KiB key)", "bitcount big", None),
    ("PFADD (one sketch)", "pfadd hll __rand_int__", None),
    ("PFCOUNT (one sketch)", "pfcount hll", None),
    ("BF.ADD (a filter per user) / SADD", "bf.add seen:__rand_int__ __rand_int__", "sadd seen:__rand_int__ __rand_int__"),
    ("BF.EXISTS (a filter per user) / SISMEMBER", "bf.exists seen:__rand_int__ __rand_int__",
     "sismember seen:__rand_int__ __rand_int__"),
]


def start(server, port, d):
    return start_server(server, port, d)


def cli(port, *args):
    subprocess.run(["redis-cli", "-p", str(port), *args], check=True, stdout=subprocess.DEVNULL)


def rate(port, command, pipeline, requests):
    out = subprocess.run(
        ["redis-benchmark", "-p", str(port), "-n", str(requests), "-c", "50", "-P", str(pipeline), "-r", "1000000",
         "-q", *command.split()], check=True, capture_output=True, text=True).stdout
    found = re.findall(r"([0-9.]+) requests per second", out)
    if not found or "ERR" in out:
        raise SystemExit(f"redis-benchmark said: {out!r}")
    return float(found[-1])


def run_server(server, port, requests):
    d = tempfile.mkdtemp(prefix="rates-")
    p = start(server, port, d)
    try:
        cli(port, "setrange", "big", "16383", "x")
        cli(port, "setrange", "big", "0", "bitsled and redis" * 900)
        found = {}
        for label, ours, theirs in COMMANDS:
            command = theirs if server == "redis" and theirs else ours
            for pipeline in (16, 1):
                found[(label, pipeline)] = rate(port, command, pipeline, requests * (4 if pipeline > 1 else 1))
        return found
    finally:
        p.terminate()
        p.wait()
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=100000, help="per unpipelined run; pipelined runs do 4x")
    ap.add_argument("binaries", nargs="+")
    a = ap.parse_args()
    servers = a.binaries + ["redis"]
    runs = {s: [] for s in servers}
    for r in range(a.rounds):
        for i, s in enumerate(servers):
            runs[s].append(run_server(s, 17501 + i, a.requests))
            print(f"round {r + 1}: {s} done", flush=True)
    med = {s: {k: statistics.median(run[k] for run in runs[s]) for k in runs[s][0]} for s in servers}
    names = [os.path.basename(os.path.dirname(os.path.dirname(b))) + "/" + os.path.basename(b) for b in a.binaries]
    for pipeline in (16, 1):
        print(f"\n-P {pipeline}, 50 clients, medians of {a.rounds} rounds (requests/s; ratio to Redis)\n")
        print("| command | " + " | ".join(names) + " | Redis 7.0 |")
        print("|---|" + "---|" * (len(names) + 1))
        for label, _, _ in COMMANDS:
            theirs = med["redis"][(label, pipeline)]
            cells = [f"{med[b][(label, pipeline)] / 1000:.0f}k ({med[b][(label, pipeline)] / theirs:.2f}x)"
                     for b in a.binaries]
            print(f"| {label} | " + " | ".join(cells) + f" | {theirs / 1000:.0f}k |")


if __name__ == "__main__":
    main()
