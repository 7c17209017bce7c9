// The seed workload through ioredis v5's cluster client (tests/server_cluster.rs):
// 30 user-id ranges x 7 daily check-in bitmaps (a range's days share a hash
// tag, so BITOP can combine them), then the week's streaks, actives, the
// last day's actives and the users retained from the first day to the
// last. Against a cluster the client is `Redis.Cluster` (it reads CLUSTER
// SLOTS and follows MOVED); with `single`, a plain client. Both must print
// the same lines.
//
// Usage: node ioredis_cluster.js HOST PORT cluster|single

const Redis = require("ioredis");

const [host, port, mode] = [process.argv[2], Number(process.argv[3]), process.argv[4]];
const RANGES = 30;
const DAYS = 7;
const USERS = 1000;

// A small deterministic generator, so both runs load the same bits.
let seed = 7;
function random() {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed / 2147483648;
}

const dayKey = (rg, d) => `checkin:{r${rg}}:day${d}`;

async function main() {
  const r = mode === "cluster" ? new Redis.Cluster([{ host, port }]) : new Redis({ host, port });
  for (let rg = 0; rg < RANGES; rg++) {
    // A pipeline of one slot's keys (a cluster pipeline must keep to one).
    const p = r.pipeline();
    for (let d = 0; d < DAYS; d++) {
      for (let u = 0; u < USERS; u++) {
        if (u % 5 === 0 || random() < 0.3) p.setbit(dayKey(rg, d), u, 1);
      }
    }
    const results = await p.exec();
    for (const [err] of results) if (err) throw err;
  }
  let streak = 0, wau = 0, dau = 0, retained = 0;
  for (let rg = 0; rg < RANGES; rg++) {
    const days = Array.from({ length: DAYS }, (_, d) => dayKey(rg, d));
    await r.bitop("AND", `streak:{r${rg}}`, ...days);
    await r.bitop("OR", `wau:{r${rg}}`, ...days);
    await r.bitop("AND", `retained:{r${rg}}`, days[0], days[DAYS - 1]);
    streak += await r.bitcount(`streak:{r${rg}}`);
    wau += await r.bitcount(`wau:{r${rg}}`);
    dau += await r.bitcount(days[DAYS - 1]);
    retained += await r.bitcount(`retained:{r${rg}}`);
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
