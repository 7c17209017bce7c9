// The seed workload through node-redis v4's cluster client
// (tests/server_cluster.rs): 30 user-id ranges x 7 daily check-in bitmaps
// (a range's days share a hash tag, so BITOP can combine them), then the
// week's streaks, actives, the last day's actives and the users retained
// from the first day to the last. Against a cluster the client is
// `createCluster` (it reads CLUSTER SLOTS and follows MOVED); with
// `single`, `createClient`. Both must print the same lines.
//
// Usage: node node_redis_cluster.js HOST PORT cluster|single

const { createClient, createCluster } = require("redis");

const [host, port, mode] = [process.argv[2], Number(process.argv[3]), process.argv[4]];
const RANGES = 30;
const DAYS = 7;
const USERS = 1000;

// A small deterministic generator, so both runs load the same bits.
let seed = 11;
function random() {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed / 2147483648;
}

const dayKey = (rg, d) => `checkin:{r${rg}}:day${d}`;

async function main() {
  const url = `redis://${host}:${port}`;
  const r = mode === "cluster" ? createCluster({ rootNodes: [{ url }] }) : createClient({ url });
  r.on("error", (e) => {
    console.log(`FAIL ${e}`);
    process.exit(1);
  });
  await r.connect();
  for (let rg = 0; rg < RANGES; rg++) {
    const writes = [];
    for (let d = 0; d < DAYS; d++) {
      for (let u = 0; u < USERS; u++) {
        if (u % 5 === 0 || random() < 0.3) writes.push(r.setBit(dayKey(rg, d), u, 1));
      }
    }
    await Promise.all(writes);
  }
  let streak = 0, wau = 0, dau = 0, retained = 0;
  for (let rg = 0; rg < RANGES; rg++) {
    const days = Array.from({ length: DAYS }, (_, d) => dayKey(rg, d));
    await r.bitOp("AND", `streak:{r${rg}}`, days);
    await r.bitOp("OR", `wau:{r${rg}}`, days);
    await r.bitOp("AND", `retained:{r${rg}}`, [days[0], days[DAYS - 1]]);
    streak += await r.bitCount(`streak:{r${rg}}`);
    wau += await r.bitCount(`wau:{r${rg}}`);
    dau += await r.bitCount(days[DAYS - 1]);
    retained += await r.bitCount(`retained:{r${rg}}`);
  }
  console.log(`streak ${streak}`);
  console.log(`wau ${wau}`);
  console.log(`dau ${dau}`);
  console.log(`retained ${retained}`);
  console.log(`keys ${RANGES * (DAYS + 3)}`);
  await r.quit();
}

main().catch((e) => {
  console.log(`FAIL ${e}`);
  process.exit(1);
});
