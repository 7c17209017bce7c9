// The seed workload (cluster_seed.js) through node-redis v4's cluster
// client. Against a cluster the client is `createCluster` (it reads CLUSTER
// SLOTS and follows MOVED); with `single`, `createClient`. Both must print
// the same lines.
//
// Usage: node node_redis_cluster.js HOST PORT cluster|single

const { createClient, createCluster } = require("redis");
const { runSeed, exitOnFailure } = require("./cluster_seed.js");

const [host, port, mode] = [process.argv[2], Number(process.argv[3]), process.argv[4]];

exitOnFailure(async () => {
  const url = `redis://${host}:${port}`;
  const r = mode === "cluster" ? createCluster({ rootNodes: [{ url }] }) : createClient({ url });
  r.on("error", (e) => {
    console.log(`FAIL ${e}`);
    process.exit(1);
  });
  await r.connect();
  await runSeed(
    {
      setBits: (pairs) => Promise.all(pairs.map(([key, offset]) => r.setBit(key, offset, 1))),
      bitop: (op, dest, keys) => r.bitOp(op, dest, keys),
      bitcount: (key) => r.bitCount(key),
    },
    11,
  );
  await r.quit();
});
