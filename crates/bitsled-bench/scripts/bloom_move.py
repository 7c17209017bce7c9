"""Times slot migrations that carry Bloom filters, against strings of the
same size, on two `bitsled serve --cluster-enabled yes` nodes (this build),
and Redis MIGRATE of the same strings between two redis-server processes
(from PATH), all in one run.

Four slots: one filter of 10^6 items at 0.01 ({bf}), 10^4 per-user filters
of 20 items ({sm}), one random string of the big filter's size ({st}), and
10^4 strings of 24 random bytes ({ss}). Each slot moves back and forth
three times with `CLUSTERX MIGRATE slot target SYNC` (the copy only, timed;
`bitsled cluster migrate` then pushes the new owner); Redis moves the big
string with MIGRATE and the small ones with one MIGRATE ... KEYS.

    python3 bloom_move.py BITSLED_BINARY

Uses loopback ports 18101-18104 and a scratch directory under /tmp.
"""
import os, subprocess, sys, time, socket, tempfile, shutil
import redis
BIN = sys.argv[1]
def wait(p):
    for _ in range(300):
        try: socket.create_connection(("127.0.0.1", p), 0.2).close(); return
        except OSError: time.sleep(0.05)
    raise SystemExit("no server")
tmp = tempfile.mkdtemp(prefix="bloom-move-")
procs = []
def bitsled(port):
    d = os.path.join(tmp, str(port)); os.makedirs(d)
    procs.append(subprocess.Popen([BIN, "--db", d, "serve", "--port", str(port), "--cluster-enabled", "yes"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    wait(port)
def rds(port):
    d = os.path.join(tmp, "r%d" % port); os.makedirs(d)
    procs.append(subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", d], stdout=subprocess.DEVNULL))
    wait(port)
A, B, RA, RB = 18101, 18102, 18103, 18104
try:
    bitsled(A); bitsled(B); rds(RA); rds(RB)
    cli = lambda *a: subprocess.run([BIN, "cluster", *a], check=True, capture_output=True, text=True).stdout
    cli("create", f"127.0.0.1:{A}"); cli("add", "--cluster", f"127.0.0.1:{A}", f"127.0.0.1:{B}")
    a = redis.Redis(port=A)
    slot = lambda tag: a.execute_command("CLUSTER KEYSLOT", tag)
    # one big filter: 10^6 items at 0.01
    a.execute_command("BF.RESERVE", "{bf}:big", 0.01, 1000000)
    for s in range(0, 1000000, 10000):
        a.execute_command("BF.MADD", "{bf}:big", *[f"n{i}" for i in range(s, s + 10000)])
    size = a.execute_command("BF.INFO", "{bf}:big", "SIZE")[0]
    # 10^4 per-user filters of 20 items
    p = a.pipeline(transaction=False)
    for u in range(10000):
        p.execute_command("BF.MADD", f"{{sm}}:u{u}", *[f"x{j}" for j in range(20)])
        if u % 500 == 499: p.execute(); p = a.pipeline(transaction=False)
    p.execute()
    # 10^4 small strings of a small filter's size
    p = a.pipeline(transaction=False); pr = redis.Redis(port=RA).pipeline(transaction=False)
    for u in range(10000):
        v = os.urandom(24); p.set(f"{{ss}}:u{u}", v); pr.set(f"{{ss}}:u{u}", v)
    p.execute(); pr.execute()
    # a string of the filter's size, random bytes
    blob = os.urandom(size)
    a.set("{st}:blob", blob)
    r1, r2 = redis.Redis(port=RA), redis.Redis(port=RB)
    r1.set("{st}:blob", blob)
    print(f"big filter BF.INFO size {size} bytes", flush=True)
    for tag in ["{bf}", "{sm}", "{st}", "{ss}"]:
        s = slot(tag); times = []
        for rnd in range(3):
            for src, dst in [(A, B), (B, A)]:
                target = redis.Redis(port=dst).execute_command("CLUSTERX", "MYID")
                t = time.perf_counter(); redis.Redis(port=src).execute_command("CLUSTERX", "MIGRATE", str(s), target, "SYNC"); times.append(time.perf_counter() - t)
                cli("migrate", "--from", f"127.0.0.1:{src}", "--to", f"127.0.0.1:{dst}", str(s))
        times.sort(); print(f"bitsled slot {tag}: moves {['%.3f' % x for x in times]} median {times[len(times)//2]:.3f} s", flush=True)
    b = redis.Redis(port=A)
    assert b.execute_command("BF.EXISTS", "{bf}:big", "n123") == 1 and b.execute_command("BF.CARD", "{sm}:u9999") == 20
    times = []
    for rnd in range(3):
        for src, dst, dport in [(r1, r2, RB), (r2, r1, RA)]:
            t = time.perf_counter(); src.execute_command("MIGRATE", "127.0.0.1", dport, "{st}:blob", 0, 60000); times.append(time.perf_counter() - t)
    times.sort(); print(f"redis MIGRATE of the same string: {['%.3f' % x for x in times]} median {times[len(times)//2]:.3f} s", flush=True)
    keys = [f"{{ss}}:u{u}" for u in range(10000)]
    times = []
    for rnd in range(3):
        for src, dst, dport in [(r1, r2, RB), (r2, r1, RA)]:
            t = time.perf_counter(); src.execute_command("MIGRATE", "127.0.0.1", dport, "", 0, 60000, "KEYS", *keys); times.append(time.perf_counter() - t)
    times.sort(); print(f"redis MIGRATE KEYS of 10^4 small strings: {['%.3f' % x for x in times]} median {times[len(times)//2]:.3f} s", flush=True)
finally:
    for p in procs: p.terminate()
    for p in procs: p.wait()
    shutil.rmtree(tmp)
