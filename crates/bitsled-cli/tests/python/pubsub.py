"""redis-py (5 or later) pub/sub against a server (argv: port). Prints one
line per check; run by tests/server_resp3.rs against bitsled and against a
real redis-server, whose lines must match.

- pub/sub in RESP2 and RESP3: subscribe, psubscribe, messages through
  get_message, a subscriber thread (run_in_thread) with a handler;
- keyspace notifications: an `expired` keyevent for a key given a short TTL.

(redis-py's own client-side cache refuses servers older than Redis 7.4, so
CLIENT TRACKING is checked on the wire by tests/server_pubsub.rs.)"""

import sys
import threading
import time

import redis

port = int(sys.argv[1])


def wait_message(p, timeout=5.0):
    end = time.time() + timeout
    while time.time() < end:
        m = p.get_message(ignore_subscribe_messages=True, timeout=0.1)
        if m is not None:
            return m
    return None


for proto in (2, 3):
    r = redis.Redis(host="127.0.0.1", port=port, protocol=proto)
    p = r.pubsub()
    p.subscribe("news")
    p.psubscribe("user:*")
    # Wait for both confirmations.
    seen = 0
    end = time.time() + 5
    while seen < 2 and time.time() < end:
        m = p.get_message(timeout=0.1)
        if m is not None and m["type"] in ("subscribe", "psubscribe"):
            seen += 1
    print(proto, "subscribed", seen, r.pubsub_numsub("news"), r.pubsub_numpat())
    print(proto, "publish", r.publish("news", "hello"), r.publish("user:7", "hi"))
    for _ in range(2):
        m = wait_message(p)
        print(proto, "got", m["type"], m.get("pattern"), m["channel"], m["data"])
    got = []
    done = threading.Event()

    def handler(message):
        got.append(message["data"])
        done.set()

    p2 = r.pubsub()
    p2.subscribe(**{"alerts": handler})
    worker = p2.run_in_thread(sleep_time=0.05, daemon=True)
    time.sleep(0.2)
    r.publish("alerts", "fire")
    done.wait(5)
    worker.stop()
    worker.join(5)
    print(proto, "thread handler", got)
    p.close()
    p2.close()

r = redis.Redis(host="127.0.0.1", port=port, protocol=3)
r.flushall()
r.config_set("notify-keyspace-events", "Ex")
p = r.pubsub()
p.psubscribe("__keyevent@0__:expired")
wait_message(p, 0.5)
r.set("session:1", "x", px=50)
m = wait_message(p)
print("expired event", m and m["channel"], m and m["data"])
r.config_set("notify-keyspace-events", "")
p.close()

