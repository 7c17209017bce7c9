// The seed workload the cluster tests run through each Node.js client
// (tests/server_cluster.rs): 30 user-id ranges x 7 daily check-in bitmaps
// (a range's days share a hash tag, so BITOP can combine them), then the
// week's streaks, actives, the last day's actives and the users retained
// from the first day to the last, printed one figure a line.
//
// `client` adapts one library: `setBits(pairs)` sets each [key, offset] of
// one range's keys (one slot), `bitop(op, dest, keys)`, `bitcount(key)`.
// `seed` starts the deterministic generator, so two runs load the same bits.

const RANGES = 30;
const DAYS = 7;
const USERS = 1000;

const dayKey = (rg, d) => `checkin:{r${rg}}:day${d}`;

async function runSeed(client, seed) {
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  for (let rg = 0; rg < RANGES; rg++) {
    const pairs = [];
    for (let d = 0; d < DAYS; d++) {
      for (let u = 0; u < USERS; u++) {
        if (u % 5 === 0 || random() < 0.3) pairs.push([dayKey(rg, d), u]);
      }
    }
    await client.setBits(pairs);
  }
  let streak = 0, wau = 0, dau = 0, retained = 0;
  for (let rg = 0; rg < RANGES; rg++) {
    const days = Array.from({ length: DAYS }, (_, d) => dayKey(rg, d));
    await client.bitop("AND", `streak:{r${rg}}`, days);
    await client.bitop("OR", `wau:{r${rg}}`, days);
    await client.bitop("AND", `retained:{r${rg}}`, [days[0], days[DAYS - 1]]);
    streak += await client.bitcount(`streak:{r${rg}}`);
    wau += await client.bitcount(`wau:{r${rg}}`);
    dau += await client.bitcount(days[DAYS - 1]);
    retained += await client.bitcount(`retained:{r${rg}}`);
  }
  console.log(`streak ${streak}`);
  console.log(`wau ${wau}`);
  console.log(`dau ${dau}`);
  console.log(`retained ${retained}`);
  console.log(`keys ${RANGES * (DAYS + 3)}`);
}

// Runs `main`, printing `FAIL reason` and exiting 1 on an error.
function exitOnFailure(main) {
  main().catch((e) => {
    console.log(`FAIL ${e}`);
    process.exit(1);
  });
}

module.exports = { runSeed, exitOnFailure };
