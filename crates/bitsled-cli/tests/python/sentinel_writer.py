"""An application writing through redis-py's Sentinel client while the
master fails over: it asks the sentinels for master `mymaster`, sets bit
i of key `sentinel:bits` for i = 0, 1, 2, ..., and every 20 writes runs
`WAIT 2 1000`. A write that fails (the master is gone, or a replica
refuses it while it is still one) is retried until it succeeds, so every
bit below the last one written was acknowledged by some master.

Usage: sentinel_writer.py SECONDS SENTINEL_PORT... Prints one line:
`written N replicated M switched S masters PORT,PORT,...`: N bits
written; the bits below M were acknowledged by `WAIT 2` (both replicas);
the bits from S on were written to the last master; the master ports
written to, in order.
"""

import sys
import time

import redis
from redis.sentinel import Sentinel

seconds = float(sys.argv[1])
sentinel = Sentinel([("127.0.0.1", int(p)) for p in sys.argv[2:]], socket_timeout=0.5)
master = sentinel.master_for("mymaster", socket_timeout=0.5)

end = time.time() + seconds
written = 0
replicated = 0
switched = 0
masters = []
while time.time() < end:
    try:
        master.setbit("sentinel:bits", written, 1)
        port = master.connection_pool.get_master_address()[1]
        if not masters or masters[-1] != port:
            masters.append(port)
            switched = written
        written += 1
        if written % 20 == 0 and master.execute_command("WAIT", 2, 1000) >= 2:
            replicated = written
    except (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError, redis.ResponseError):
        time.sleep(0.05)
print(f"written {written} replicated {replicated} switched {switched} masters {','.join(str(m) for m in masters)}")
