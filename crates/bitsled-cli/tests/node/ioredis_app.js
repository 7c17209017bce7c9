// A sign-in statistics application written against ioredis v5, run once
// against Redis and once against `bitsled serve` (tests/server_node.rs):
// every line it prints must be the same on both. Each check also compares
// the server's answers with a model computed here, and exits non-zero on
// the first difference.
//
// Usage: node ioredis_app.js HOST PORT

const Redis = require("ioredis");

const [host, port] = [process.argv[2], Number(process.argv[3])];
const USERS = 5000;
const DAYS = 7;

function fail(what, got, want) {
  console.log(`FAIL ${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  process.exit(1);
}

function same(what, got, want) {
  if (JSON.stringify(got) !== JSON.stringify(want)) fail(what, got, want);
}

// A deterministic generator, so both runs write the same bits.
let seed = 12345;
function next() {
  seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
  return seed >>> 8;
}

// Redis's bit order: offset 0 is the most significant bit of byte 0.
function bytesOf(bits, n) {
  const out = Buffer.alloc(Math.ceil(n / 8));
  for (const b of bits) out[b >> 3] |= 0x80 >> (b & 7);
  return out;
}

function popcount(buf) {
  let n = 0;
  for (const byte of buf) for (let x = byte; x; x &= x - 1) n++;
  return n;
}

async function main() {
  // `db` makes ioredis SELECT on connect; the ready check sends INFO;
  // `connectionName` sends CLIENT SETNAME.
  const r = new Redis({ host, port, db: 2, connectionName: "signin-app", lazyConnect: true });
  await r.connect();
  await r.flushdb();
  same("client getname", await r.client("GETNAME"), "signin-app");

  // Daily sign-ins, written in one pipeline of SETBITs.
  const days = [];
  const pipe = r.pipeline();
  for (let d = 0; d < DAYS; d++) {
    const set = new Set();
    for (let i = 0; i < USERS * 0.6; i++) set.add(next() % USERS);
    // Every user 0..99 signs in every day.
    for (let u = 0; u < 100; u++) set.add(u);
    days.push(set);
    for (const u of set) pipe.setbit(`sign:day:${d}`, u, 1);
  }
  const results = await pipe.exec();
  same("pipeline errors", results.filter(([err]) => err).length, 0);
  same("pipeline replies", results.length, days.reduce((n, s) => n + s.size, 0));
  console.log(`ok pipeline ${results.length}`);

  // Seven days in a row: BITOP AND, then BITCOUNT.
  const every = [...days[0]].filter((u) => days.every((s) => s.has(u)));
  const keys = days.map((_, d) => `sign:day:${d}`);
  same("bitop and length", await r.bitop("AND", "sign:week:all", ...keys), Math.ceil(USERS / 8));
  same("7 days in a row", await r.bitcount("sign:week:all"), every.length);
  console.log(`ok streak ${every.length}`);

  // Weekly actives: BITOP OR; its bytes as a Buffer equal the model's.
  const any = new Set(days.flatMap((s) => [...s]));
  await r.bitop("OR", "sign:week:any", ...keys);
  const anyBytes = await r.getBuffer("sign:week:any");
  same("weekly actives bytes", anyBytes.equals(bytesOf(any, USERS)), true);
  same("weekly actives", popcount(anyBytes), any.size);
  console.log(`ok actives ${any.size}`);

  // Not signed in on day 0: XOR with an all-users bitmap.
  const all = r.pipeline();
  for (let u = 0; u < USERS; u++) all.setbit("users:all", u, 1);
  await all.exec();
  await r.bitop("XOR", "sign:day:0:missing", "users:all", "sign:day:0");
  same("missing day 0", await r.bitcount("sign:day:0:missing"), USERS - days[0].size);
  const firstMissing = [...Array(USERS).keys()].find((u) => !days[0].has(u));
  same("first missing", await r.bitpos("sign:day:0:missing", 1), firstMissing);
  same("first signed in", await r.bitpos("sign:day:0", 1), Math.min(...days[0]));
  same("bitcount BIT range", await r.bitcount("sign:day:1", 0, 99, "BIT"), 100);
  same("getbit", await r.getbit("sign:day:2", 5), 1);
  console.log(`ok missing ${USERS - days[0].size}`);

  // Unique visitors: PFADD in batches, PFCOUNT, PFMERGE.
  for (let b = 0; b < 20; b++) {
    const batch = [];
    for (let i = 0; i < 500; i++) batch.push(`visitor-${(b * 500 + i) % 7000}`);
    await r.pfadd("uv:day", ...batch);
  }
  await r.pfadd("uv:other", "visitor-1", "visitor-99999");
  await r.pfmerge("uv:both", "uv:day", "uv:other");
  console.log(`ok pfcount ${await r.pfcount("uv:day")} ${await r.pfcount("uv:both")}`);

  // scanStream with MATCH and COUNT finds every daily key exactly once.
  const seen = [];
  await new Promise((resolve, reject) => {
    const stream = r.scanStream({ match: "sign:day:?", count: 3 });
    stream.on("data", (batch) => seen.push(...batch));
    stream.on("end", resolve);
    stream.on("error", reject);
  });
  same("scanStream", seen.sort(), [...keys].sort());
  console.log(`ok scan ${seen.length}`);

  // Everyday string commands beside the bitmaps.
  same("set ex", await r.set("session:1", "alice", "EX", 100), "OK");
  // TTL rounds the time left: 99 once half a second has passed.
  const ttl = await r.ttl("session:1");
  if (ttl !== 100 && ttl !== 99) fail("ttl", ttl, "99 or 100");
  same("incr", await r.incr("visits"), 1);
  same("incrby", await r.incrby("visits", 41), 42);
  same("append", await r.append("log", "a,b"), 3);
  same("mset", await r.mset({ k1: "v1", k2: "v2" }), "OK");
  same("mget", await r.mget("k1", "missing", "k2"), ["v1", null, "v2"]);
  same("getrange", await r.getrange("session:1", 1, 3), "lic");
  same("strlen", await r.strlen("sign:week:any"), Math.ceil(USERS / 8));
  same("exists", await r.exists("k1", "k2", "nope"), 2);
  same("type", await r.type("uv:day"), "string");
  console.log("ok strings");

  // Errors come back as rejected promises with Redis's text.
  try {
    await r.setbit("sign:day:0", -1, 1);
    fail("negative offset", "no error", "an error");
  } catch (e) {
    console.log(`ok error ${e.message}`);
  }
  try {
    await r.pfadd("visits", "x");
    fail("pfadd on a non-sketch", "no error", "an error");
  } catch (e) {
    console.log(`ok error ${e.message}`);
  }

  // keyPrefix: a second client whose keys land under "tenant:".
  const t = new Redis({ host, port, db: 2, keyPrefix: "tenant:" });
  await t.setbit("flags", 7, 1);
  same("prefixed key", await r.getBuffer("tenant:flags"), Buffer.from([1]));

  // Optimistic locking: WATCH, a write from another client, EXEC aborts.
  await r.watch("visits");
  await t.set("ignored", "x");
  const other = new Redis({ host, port, db: 2 });
  await other.incr("visits");
  same("aborted exec", await r.multi().incr("visits").exec(), null);
  const done = await r.multi().incr("visits").get("visits").exec();
  same("exec", done, [[null, 44], [null, "44"]]);
  console.log("ok watch");

  // Another database is another keyspace.
  const db0 = new Redis({ host, port });
  same("other database", await db0.exists("visits"), 0);
  // 7 days, 2 weekly results, all users, day 0's missing, 3 sketches,
  // 5 strings, 2 prefixed keys.
  same("dbsize", await r.dbsize(), 21);

  await Promise.all([r, t, other, db0].map((c) => c.quit()));
  console.log("ok done");
}

main().catch((e) => {
  console.log(`FAIL ${e.stack}`);
  process.exit(1);
});
