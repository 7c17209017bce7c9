"""What an application switching from Redis does with redis-py, beyond
bitmaps: optimistic transactions (WATCH), SCAN over a keyspace that changes
meanwhile, several databases, counters and the other string commands, and
the introspection clients and exporters read (INFO, OBJECT, MEMORY, DUMP).

Usage: app_client.py HOST PORT. Prints one "ok <scenario>" line per
scenario; any failed expectation raises. The test runs it against a real
redis-server first (which checks the expectations) and then against
`bitsled serve`.
"""

import sys
import threading

import redis

HOST, PORT = sys.argv[1], int(sys.argv[2])


def client(db=0):
    return redis.Redis(host=HOST, port=PORT, db=db)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def optimistic_transactions():
    r, other = client(), client()
    r.set("balance", 100)
    attempts = []

    def withdraw(pipe):
        attempts.append(1)
        balance = int(pipe.get("balance"))
        if len(attempts) == 1:
            # Another client changes the watched key before EXEC: the first
            # attempt must fail and be retried.
            other.incrby("balance", 50)
        pipe.multi()
        pipe.set("balance", balance - 30)

    r.transaction(withdraw, "balance")
    check(len(attempts) == 2, f"the conflicting write forces one retry: {len(attempts)} attempts")
    check(int(r.get("balance")) == 120, f"100 + 50 - 30: {r.get('balance')}")

    with r.pipeline() as pipe:
        pipe.watch("balance")
        other.set("balance", 0)
        pipe.multi()
        pipe.set("balance", 999)
        try:
            pipe.execute()
            raise AssertionError("EXEC after a watched key changed must fail")
        except redis.WatchError:
            pass
    check(r.get("balance") == b"0", "the failed transaction wrote nothing")

    with r.pipeline() as pipe:
        pipe.watch("balance")
        pipe.unwatch()
        other.set("balance", 1)
        pipe.multi()
        pipe.incr("balance")
        check(pipe.execute() == [2], "UNWATCH forgets the watched keys")

    with r.pipeline() as pipe:
        pipe.watch("gone")
        other.set("gone", "x")
        other.delete("gone")
        pipe.multi()
        pipe.ping()
        try:
            pipe.execute()
            raise AssertionError("a watched key created and deleted meanwhile counts as changed")
        except redis.WatchError:
            pass
    print("ok optimistic transactions")


def scan_while_writing():
    r, writer = client(), client()
    r.flushdb()
    n = 10_000
    with r.pipeline(transaction=False) as p:
        for i in range(n):
            p.set(f"user:{i}", i)
        p.execute()
    stop = threading.Event()

    def churn():
        i = 0
        while not stop.is_set():
            writer.set(f"new:{i}", i)
            writer.delete(f"new:{i - 50}")
            i += 1

    t = threading.Thread(target=churn)
    t.start()
    seen, calls, cursor = set(), 0, 0
    try:
        while True:
            cursor, keys = r.scan(cursor=cursor, match="user:*", count=100)
            calls += 1
            seen.update(keys)
            check(cursor < 2**53, f"a cursor a JavaScript number holds exactly: {cursor}")
            if cursor == 0:
                break
            check(calls < 10 * n, "the scan ends")
        via_iter = set(r.scan_iter(match="user:*", count=500))
    finally:
        stop.set()
        t.join()
    want = {f"user:{i}".encode() for i in range(n)}
    check(want <= seen, f"every key present throughout is returned: {len(want - seen)} missing")
    check(want <= via_iter, "scan_iter too")
    print("ok scan while writing")


def databases():
    d0, d3 = client(0), client(3)
    d0.flushall()
    d3.set("only-in-3", "x")
    check(d0.get("only-in-3") is None, "databases are separate")
    check(d3.get("only-in-3") == b"x", "db=3 reads its own key")
    d0.set("in-0", "y")
    d3.flushdb()
    check(d3.dbsize() == 0 and d0.dbsize() == 1, "FLUSHDB empties only the selected database")
    check(d0.move("in-0", 3), "MOVE")
    check(d0.get("in-0") is None and d3.get("in-0") == b"y", "MOVE moved the key")
    d0.swapdb(0, 3)
    check(d0.get("in-0") == b"y" and d3.dbsize() == 0, "SWAPDB")
    check(d0.copy("in-0", "copy", destination_db=3), "COPY ... DB")
    check(d3.get("copy") == b"y", "the copy is in db 3")
    info = d0.info("keyspace")
    check(info.get("db0", {}).get("keys") == 1 and info.get("db3", {}).get("keys") == 1, f"INFO keyspace: {info}")
    print("ok databases")


def counters_and_strings():
    r = client()
    r.flushdb()
    check(r.incr("visits") == 1 and r.incrby("visits", 41) == 42 and r.decr("visits") == 41, "INCR/INCRBY/DECR")
    check(r.decrby("visits", 40) == 1, "DECRBY")
    check(r.incrbyfloat("price", 10.5) == 10.5, "INCRBYFLOAT from nothing")
    check(r.incrbyfloat("price", 0.1) == 10.6, "INCRBYFLOAT in long double precision")
    check(r.get("price") == b"10.6", f"stored as Redis prints it: {r.get('price')}")
    try:
        r.incr("price")
        raise AssertionError("INCR of a float must fail")
    except redis.ResponseError as e:
        check("not an integer" in str(e), str(e))
    check(r.mset({"a": 1, "b": 2}) and r.mget("a", "b", "c") == [b"1", b"2", None], "MSET/MGET")
    check(not r.msetnx({"b": 3, "c": 4}) and r.get("c") is None, "MSETNX is all or nothing")
    check(r.setnx("lock", "me") and not r.setnx("lock", "you"), "SETNX")
    check(r.getset("lock", "next") == b"me", "GETSET")
    r.setex("session", 100, "s")
    check(90 < r.ttl("session") <= 100, "SETEX")
    r.psetex("short", 100_000, "p")
    check(r.pttl("short") > 90_000, "PSETEX")
    check(r.getex("session", persist=True) == b"s" and r.ttl("session") == -1, "GETEX PERSIST")
    check(r.getex("session", ex=50) == b"s" and 40 < r.ttl("session") <= 50, "GETEX EX")
    check(r.touch("a", "b", "nope") == 2, "TOUCH")
    check(r.set("k", "v", nx=True) and r.set("k", "w", nx=True) is None, "SET NX")
    check(r.set("k", "x", get=True) == b"v", "SET GET")
    print("ok counters and strings")


def introspection():
    r = client()
    r.flushdb()
    r.set("n", 123)
    r.set("s", "hello")
    r.set("long", "x" * 100)
    check(r.object("encoding", "n") == b"int", "OBJECT ENCODING int")
    check(r.object("encoding", "s") == b"embstr", "OBJECT ENCODING embstr")
    check(r.object("encoding", "long") == b"raw", "OBJECT ENCODING raw")
    check(r.object("refcount", "s") == 1, "OBJECT REFCOUNT")
    check(isinstance(r.object("idletime", "s"), int), "OBJECT IDLETIME")
    check(r.memory_usage("long") > 100 and r.memory_usage("nope") is None, "MEMORY USAGE")
    payload = r.dump("long")
    r.restore("restored", 0, payload)
    check(r.get("restored") == b"x" * 100, "DUMP/RESTORE round trip")
    try:
        r.restore("restored", 0, payload)
        raise AssertionError("RESTORE onto an existing key must fail")
    except redis.ResponseError as e:
        check("BUSYKEY" in str(e), str(e))
    r.restore("restored", 0, payload, replace=True)
    check(r.randomkey() in {b"n", b"s", b"long", b"restored"}, "RANDOMKEY")
    secs, micros = r.time()
    check(secs > 1_600_000_000 and 0 <= micros < 1_000_000, "TIME")
    r.expire("s", 1000)
    info = r.info()
    for field in ["used_memory", "used_memory_rss", "maxmemory", "role", "connected_clients", "used_cpu_sys"]:
        check(field in info, f"INFO has {field}")
    check(info["role"] == "master", "role:master")
    ks = info["db0"]
    # Redis estimates avg_ttl by sampling (0 until it has); bitsled computes it.
    check(ks["keys"] == 4 and ks["expires"] == 1 and 0 <= ks["avg_ttl"] <= 1_000_000, f"INFO keyspace: {ks}")
    try:
        r.execute_command("NOSUCHCOMMAND")
    except redis.ResponseError:
        pass
    # redis-py leaves "count=N" unparsed (no comma in it).
    errs = str(r.info("errorstats").get("errorstat_ERR", "count=0"))
    check(int(errs.split("=")[-1].strip("}'")) >= 1, f"INFO errorstats: {errs}")
    print("ok introspection")


optimistic_transactions()
scan_while_writing()
databases()
counters_and_strings()
introspection()
