"""redis-py (5 or later) against a server in RESP2 or RESP3 (argv: port,
protocol). Prints one line per reply kind the client turns into Python
types: RedisBloom's booleans and BF.INFO, bitmap integers, INFO, CLIENT
INFO, CONFIG GET, MEMORY STATS. Run by tests/server_resp3.rs."""

import sys

import redis

port, proto = int(sys.argv[1]), int(sys.argv[2])
r = redis.Redis(host="127.0.0.1", port=port, protocol=proto)
r.flushall()
bf = r.bf()
print("bf.add", repr(bf.add("f", "a")), repr(bf.add("f", "a")))
print("bf.exists", repr(bf.exists("f", "a")), repr(bf.exists("f", "zz")))
print("bf.madd", repr(bf.madd("f", "a", "b")))
print("bf.mexists", repr(bf.mexists("f", "a", "q")))
info = bf.info("f")
if isinstance(info, dict):
    print("bf.info", sorted(k.decode() for k in info), info[b"Capacity"], info[b"Number of items inserted"])
else:
    print("bf.info", type(info).__name__, info.capacity, info.insertedNum)
print("setbit", r.setbit("b", 7, 1), r.getbit("b", 7), r.bitcount("b"))
print("info", type(r.info()).__name__, "redis_version" in r.info())
print("client info", type(r.client_info()).__name__, r.client_info()["cmd"])
print("config get", r.config_get("maxmemory"))
print("memory stats", type(r.memory_stats()).__name__, r.memory_stats()["keys.count"])
