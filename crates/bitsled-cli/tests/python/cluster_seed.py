"""The seed workload through redis-py's cluster client.

usage: cluster_seed.py HOST PORT cluster|single

Loads 60 user-id ranges x 7 daily check-in bitmaps (a range's days share a
hash tag, so they live in one slot and BITOP can combine them), then prints
the answers an application asks for: users active every day of the week
(BITOP AND + BITCOUNT), weekly actives (BITOP OR), daily actives, and users
retained from the first day to the last. With `cluster` the client is
RedisCluster (it reads CLUSTER SLOTS and follows MOVED); with `single`, a
plain client of one server. The two must print the same lines.
"""
import random
import sys

import redis
from redis.cluster import RedisCluster

host, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if mode == "cluster":
    r = RedisCluster(host=host, port=port)
else:
    r = redis.Redis(host=host, port=port)

RANGES, DAYS, USERS = 60, 7, 2000
rng = random.Random(7)


def day_key(rg, d):
    return f"checkin:{{r{rg}}}:day{d}"


# Each range's users: the loyal fifth check in every day, the rest with
# probability 0.3.
for rg in range(RANGES):
    p = r.pipeline()
    for d in range(DAYS):
        for u in range(USERS):
            if u % 5 == 0 or rng.random() < 0.3:
                p.setbit(day_key(rg, d), u, 1)
    p.execute()

streak = wau = dau = retained = counted = 0
for rg in range(RANGES):
    days = [day_key(rg, d) for d in range(DAYS)]
    # bitsled's BITOP.COUNT: the count BITOP would store, routed by the
    # client from the command's key specs (COMMAND) like any command.
    counted += r.execute_command("BITOP.COUNT", "AND", *days)
    r.bitop("AND", f"streak:{{r{rg}}}", *days)
    r.bitop("OR", f"wau:{{r{rg}}}", *days)
    r.bitop("AND", f"retained:{{r{rg}}}", days[0], days[-1])
    streak += r.bitcount(f"streak:{{r{rg}}}")
    wau += r.bitcount(f"wau:{{r{rg}}}")
    dau += r.bitcount(days[-1])
    retained += r.bitcount(f"retained:{{r{rg}}}")
    assert r.getbit(days[0], 0) == 1, "user 0 is loyal"

# A read of every key through the client, wherever it lives.
keys = [day_key(rg, d) for rg in range(RANGES) for d in range(DAYS)]
lengths = sum(r.strlen(k) for k in keys)

assert counted == streak, (counted, streak)
print(f"streak {streak}")
print(f"wau {wau}")
print(f"dau {dau}")
print(f"retained {retained}")
print(f"bytes {lengths}")
print(f"keys {RANGES * (DAYS + 3)}")
