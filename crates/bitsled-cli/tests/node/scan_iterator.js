// node-redis v4 as an application uses it: scanIterator over a keyspace
// (its cursor is a JavaScript number, exact only below 2^53), a client
// bound to database 3, and WATCH/MULTI/EXEC.
//
// Usage: node scan_iterator.js HOST PORT. Prints "ok ..." lines; a failed
// expectation exits non-zero.
const { createClient } = require('redis');

const [host, port] = [process.argv[2], Number(process.argv[3])];

function check(cond, what) {
  if (!cond) {
    console.error('FAILED: ' + what);
    process.exit(1);
  }
}

async function main() {
  const r = createClient({ socket: { host, port } });
  await r.connect();
  await r.flushAll();
  const n = 3068;
  for (let i = 0; i < n; i += 500) {
    const pairs = [];
    for (let j = i; j < Math.min(n, i + 500); j++) pairs.push([`uid:${j}`, String(j)]);
    await r.mSet(pairs);
  }
  const seen = new Set();
  let calls = 0;
  for await (const key of r.scanIterator({ MATCH: 'uid:*', COUNT: 100 })) {
    seen.add(key);
    calls++;
    check(calls < 10 * n, 'scanIterator ends');
  }
  check(seen.size === n, `scanIterator returns every key: ${seen.size} of ${n}`);
  console.log('ok scanIterator');

  const d3 = createClient({ socket: { host, port }, database: 3 });
  await d3.connect();
  await d3.set('in-3', 'x');
  check((await r.get('in-3')) === null, 'database 3 is separate');
  check((await d3.get('in-3')) === 'x', 'database 3 reads its key');
  console.log('ok database 3');

  const other = createClient({ socket: { host, port } });
  await other.connect();
  await r.set('balance', '10');
  const conflicted = await r.executeIsolated(async (iso) => {
    await iso.watch('balance');
    await other.set('balance', '20');
    try {
      await iso.multi().incr('balance').exec();
      return false;
    } catch (e) {
      return e.constructor.name === 'WatchError';
    }
  });
  check(conflicted, 'EXEC fails after a watched key changed');
  check((await r.get('balance')) === '20', 'the failed transaction wrote nothing');
  console.log('ok watch');
  await Promise.all([r.quit(), d3.quit(), other.quit()]);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
