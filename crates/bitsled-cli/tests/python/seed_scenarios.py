"""The seed users' scenarios (BRIEF section 1), run through the Python
`redis` client against a server at HOST:PORT. Each scenario computes its
expected answers in Python and asserts the server's; the script prints
`ok <scenario>` for each and exits non-zero on the first mismatch.

    python3 seed_scenarios.py HOST PORT [--redis7]

`--redis7` skips what Redis 7 itself lacks (BITOP DIFF, the BF.* module
commands), so the same script can be checked against a real redis-server.
"""

import random
import sys

import redis

USERS = 100_000


def expect(what, got, want):
    if got != want:
        raise AssertionError(f"{what}: got {got!r}, want {want!r}")


def login_status(r, rng):
    online = set(rng.sample(range(USERS), 5_000))
    pipe = r.pipeline(transaction=False)
    for uid in online:
        pipe.setbit("login_status", uid, 1)
    pipe.execute()
    gone = rng.sample(sorted(online), 1_000)
    pipe = r.pipeline(transaction=False)
    for uid in gone:
        pipe.setbit("login_status", uid, 0)
    replies = pipe.execute()
    expect("SETBIT replies the old bit", replies, [1] * len(gone))
    online -= set(gone)
    expect("online users", r.bitcount("login_status"), len(online))
    some = next(iter(online))
    expect("GETBIT of an online user", r.getbit("login_status", some), 1)
    expect("GETBIT of a logged-out user", r.getbit("login_status", gone[0]), 0)


def monthly_sign_in(r, rng):
    for uid in range(200):
        days = sorted(rng.sample(range(31), rng.randint(1, 31)))
        key = f"uid:sign:{uid}:202611"
        pipe = r.pipeline(transaction=False)
        for d in days:
            pipe.setbit(key, d, 1)
        pipe.execute()
        expect(f"days signed by {uid}", r.bitcount(key), len(days))
        expect(f"first sign-in of {uid}", r.bitpos(key, 1), days[0])


def consecutive_check_in(r, rng):
    days = [f"checkin:202611{d:02d}" for d in range(1, 8)]
    sets = []
    for key in days:
        users = set(rng.sample(range(USERS), 30_000))
        sets.append(users)
        pipe = r.pipeline(transaction=False)
        for uid in users:
            pipe.setbit(key, uid, 1)
        pipe.execute()
    all_seven = set.intersection(*sets)
    r.bitop("AND", "checkin:7days", *days)
    expect("users who checked in 7 days in a row", r.bitcount("checkin:7days"), len(all_seven))
    return days, sets


def dau_mau_retention(r, days, sets):
    expect("DAU", r.bitcount(days[-1]), len(sets[-1]))
    r.bitop("OR", "mau", *days)
    expect("MAU", r.bitcount("mau"), len(set.union(*sets)))
    r.bitop("AND", "retained", days[-2], days[-1])
    expect("retained users", r.bitcount("retained"), len(sets[-2] & sets[-1]))


def new_users(r, days, sets):
    r.bitop("DIFF", "new", days[-1], days[-2])
    expect("new users (DIFF)", r.bitcount("new"), len(sets[-1] - sets[-2]))
    r.bitop("OR", "all_users", "all_users", days[-1])
    expect("all users after OR", r.bitcount("all_users"), len(sets[-1]))


def user_tags(r, rng):
    everyone = set(range(USERS))
    pipe = r.pipeline(transaction=False)
    pipe.setrange("user:all", 0, b"\xff" * (USERS // 8))
    tagged = set(rng.sample(range(USERS), 40))
    for uid in tagged:
        pipe.setbit("user:vip", uid, 1)
    pipe.execute()
    r.bitop("XOR", "not_vip", "user:all", "user:vip")
    expect("users without the tag", r.bitcount("not_vip"), len(everyone - tagged))
    # List the tagged users' ids: BITPOS in bit units from one set bit on.
    listed, at = [], 0
    while True:
        pos = r.execute_command("BITPOS", "user:vip", 1, at, -1, "BIT")
        if pos < 0:
            break
        listed.append(pos)
        at = pos + 1
    expect("listed tagged users", listed, sorted(tagged))


def unique_visitors(r, rng):
    pages = {}
    for page in ("home", "cart"):
        visitors = [f"user{rng.randrange(50_000)}" for _ in range(20_000)]
        pages[page] = set(visitors)
        for i in range(0, len(visitors), 1000):
            r.pfadd(f"page:uv:{page}", *visitors[i : i + 1000])
        n = r.pfcount(f"page:uv:{page}")
        exact = len(pages[page])
        if abs(n - exact) > exact * 0.03:
            raise AssertionError(f"PFCOUNT {page}: {n} vs exact {exact}")
    union = r.pfcount("page:uv:home", "page:uv:cart")
    exact = len(pages["home"] | pages["cart"])
    if abs(union - exact) > exact * 0.03:
        raise AssertionError(f"PFCOUNT union: {union} vs exact {exact}")
    expect("PFMERGE", r.pfmerge("page:uv:all", "page:uv:home", "page:uv:cart"), True)
    expect("merged count equals the union count", r.pfcount("page:uv:all"), union)


def dedup(r, rng):
    expect("BF.RESERVE", r.execute_command("BF.RESERVE", "seen", "0.001", "100000"), b"OK")
    items = [f"msg:{i}" for i in range(20_000)]
    added = r.execute_command("BF.MADD", "seen", *items[:10_000])
    if sum(added) < 9_980:
        raise AssertionError(f"BF.MADD: only {sum(added)} of 10000 new items reported new")
    again = r.execute_command("BF.MADD", "seen", *items[:10_000])
    expect("BF.MADD of seen items", sum(again), 0)
    exists = r.execute_command("BF.MEXISTS", "seen", *items)
    expect("no false negatives", exists[:10_000], [1] * 10_000)
    false_positives = sum(exists[10_000:])
    if false_positives > 50:
        raise AssertionError(f"{false_positives} false positives in 10000 (0.1% expected)")
    expect("BF.EXISTS", r.execute_command("BF.EXISTS", "seen", items[0]), 1)
    expect("BF.RESERVE on an existing key", _error(lambda: r.execute_command("BF.RESERVE", "seen", "0.01", "10")), "item exists")


def housekeeping(r):
    r.setbit("checkin:20260101", 7, 1)
    expect("EXPIRE", r.expire("checkin:20260101", 2_592_000), True)
    ttl = r.ttl("checkin:20260101")
    if not 2_591_990 <= ttl <= 2_592_000:
        raise AssertionError(f"TTL {ttl}")
    expect("PERSIST", r.persist("checkin:20260101"), True)
    expect("TTL after PERSIST", r.ttl("checkin:20260101"), -1)
    expect("TTL of a missing key", r.ttl("no-such-key"), -2)


def _error(f):
    try:
        f()
    except redis.ResponseError as e:
        return str(e)
    return None


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    redis7 = "--redis7" in sys.argv[3:]
    r = redis.Redis(host=host, port=port)
    r.flushall()
    rng = random.Random(20261122)
    login_status(r, rng)
    print("ok login status")
    monthly_sign_in(r, rng)
    print("ok monthly sign-in")
    days, sets = consecutive_check_in(r, rng)
    print("ok 7-day check-in")
    dau_mau_retention(r, days, sets)
    print("ok DAU/MAU/retention")
    if not redis7:
        new_users(r, days, sets)
        print("ok new users")
    user_tags(r, rng)
    print("ok user tags")
    unique_visitors(r, rng)
    print("ok unique visitors")
    if not redis7:
        dedup(r, rng)
        print("ok dedup")
    housekeeping(r)
    print("ok housekeeping")


if __name__ == "__main__":
    main()
