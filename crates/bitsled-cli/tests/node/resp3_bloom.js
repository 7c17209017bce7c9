// node-redis (v5 or v6) against a server, in the protocol given as the
// third argument (2 or 3; none: the client's default). Prints one line per
// reply kind a client turns into its own types: RedisBloom's booleans and
// its BF.INFO map, bitmap integers, INFO text. Run by tests/server_resp3.rs.
const { createClient } = require('redis');

(async () => {
  const [host, port, resp] = process.argv.slice(2);
  const opts = { url: `redis://${host}:${port}` };
  if (resp) opts.RESP = Number(resp);
  const c = createClient(opts);
  c.on('error', (e) => {
    console.error('client error', e);
    process.exit(1);
  });
  await c.connect();
  await c.flushAll();
  console.log('bf.add', JSON.stringify(await c.bf.add('f', 'a')), JSON.stringify(await c.bf.add('f', 'a')));
  console.log('bf.exists', JSON.stringify(await c.bf.exists('f', 'a')), JSON.stringify(await c.bf.exists('f', 'zz')));
  console.log('bf.mAdd', JSON.stringify(await c.bf.mAdd('f', ['a', 'b'])));
  console.log('bf.mExists', JSON.stringify(await c.bf.mExists('f', ['a', 'q'])));
  console.log('bf.info', JSON.stringify(await c.bf.info('f')));
  console.log('setBit', await c.setBit('b', 7, 1), await c.getBit('b', 7), await c.bitCount('b'));
  const info = await c.info('server');
  console.log('info', typeof info, info.includes('redis_version:'));
  await c.quit();
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
