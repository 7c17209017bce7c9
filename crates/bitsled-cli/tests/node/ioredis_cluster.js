// The seed workload (cluster_seed.js) through ioredis v5's cluster client.
// Against a cluster the client is `Redis.Cluster` (it reads CLUSTER SLOTS
// and follows MOVED); with `single`, a plain client. Both must print the
// same lines.
//
// Usage: node ioredis_cluster.js HOST PORT cluster|single

const Redis = require("ioredis");
const { runSeed, exitOnFailure } = require("./cluster_seed.js");

const [host, port, mode] = [process.argv[2], Number(process.argv[3]), process.argv[4]];

exitOnFailure(async () => {
  const r = mode === "cluster" ? new Redis.Cluster([{ host, port }]) : new Redis({ host, port });
  await runSeed(
    {
      // A pipeline of one slot's keys (a cluster pipeline must keep to one).
      setBits: async (pairs) => {
        const p = r.pipeline();
        for (const [key, offset] of pairs) p.setbit(key, offset, 1);
        const results = await p.exec();
        for (const [err] of results) if (err) throw err;
      },
      bitop: (op, dest, keys) => r.bitop(op, dest, ...keys),
      bitcount: (key) => r.bitcount(key),
    },
    7,
  );
  await r.quit();
});
