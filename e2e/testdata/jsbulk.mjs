// Bulk-writes documents with the official JavaScript SDK's bulk API
// (@azure/cosmos, container.items.executeBulkOperations) and reads every
// one back, the way a user of that SDK would load a container.
//
// usage: node jsbulk.mjs ENDPOINT KEY DATABASE CONTAINER COUNT KEYS [Create|Upsert]
//
// Document i is {"id":"doc-i","pk":"key-(i mod KEYS)","n":i}; the container
// (partition key /pk) is created when missing. The last line on stdout is
// a JSON summary: {"written":N,"statuses":{"201":N},"charge":RU,"read":N}.
// Any operation that failed, or any document that did not read back as
// written, is printed on stderr and the exit status is 1.
import { CosmosClient } from "@azure/cosmos";

const [endpoint, key, databaseId, containerId, countArg, keysArg, opType = "Create"] = process.argv.slice(2);
const count = Number(countArg);
const keys = Number(keysArg);
if (!endpoint || !key || !databaseId || !containerId || !(count > 0) || !(keys > 0)) {
  console.error("usage: node jsbulk.mjs ENDPOINT KEY DATABASE CONTAINER COUNT KEYS [Create|Upsert]");
  process.exit(2);
}

const docOf = (i) => ({ id: `doc-${i}`, pk: `key-${i % keys}`, n: i });

async function main() {
  const client = new CosmosClient({ endpoint, key });
  const { database } = await client.databases.createIfNotExists({ id: databaseId });
  const { container } = await database.containers.createIfNotExists({
    id: containerId,
    partitionKey: { paths: ["/pk"], version: 2 },
  });

  const operations = [];
  for (let i = 0; i < count; i++) {
    const doc = docOf(i);
    // executeBulkOperations wants every operation's key spelled out.
    operations.push({ operationType: opType, partitionKey: doc.pk, resourceBody: doc });
  }
  const results = await container.items.executeBulkOperations(operations);

  let failed = 0;
  let charge = 0;
  const statuses = {};
  results.forEach((r, i) => {
    const status = r.response ? r.response.statusCode : r.error ? r.error.code : "none";
    statuses[status] = (statuses[status] || 0) + 1;
    if (r.response) {
      charge += r.response.requestCharge || 0;
    }
    if (!r.response || r.response.statusCode >= 300) {
      failed++;
      console.error(`operation ${i}: ${status} ${r.error ? r.error.message : ""}`);
    }
  });

  const { resources } = await container.items.query("SELECT * FROM c").fetchAll();
  const byId = new Map(resources.map((d) => [d.id, d]));
  for (let i = 0; i < count; i++) {
    const want = docOf(i);
    const got = byId.get(want.id);
    if (!got || got.pk !== want.pk || got.n !== want.n) {
      failed++;
      console.error(`document ${want.id}: read back ${JSON.stringify(got)}`);
    }
  }
  console.log(JSON.stringify({ written: results.length - failed, statuses, charge, read: resources.length }));
  process.exitCode = failed > 0 ? 1 : 0;
}

main().catch((err) => {
  console.error(`jsbulk: ${err && err.stack ? err.stack : err}`);
  process.exit(1);
});
