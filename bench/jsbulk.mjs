// Loads an NDJSON file with the official JavaScript SDK's bulk API
// (@azure/cosmos from the committed npm lock, container.items
// .executeBulkOperations), all records in one call, the way a user of that
// SDK would: bench/runner's contender for range batches (scenario R).
//
// usage: node bench/jsbulk.mjs ENDPOINT KEY DATABASE CONTAINER PK_FIELD RU FILE
//
// The container (partition key /PK_FIELD, RU manual throughput) is created
// when missing. It prints one JSON line on stdout: the records, the seconds
// the bulk call took (reading and parsing the file before it not counted),
// the operations' statuses and their charges.
import { readFileSync } from "node:fs";
import { CosmosClient } from "@azure/cosmos";

const [endpoint, key, databaseId, containerId, pkField, ruArg, file] = process.argv.slice(2);
if (!endpoint || !key || !databaseId || !containerId || !pkField || !(Number(ruArg) > 0) || !file) {
  console.error("usage: node bench/jsbulk.mjs ENDPOINT KEY DATABASE CONTAINER PK_FIELD RU FILE");
  process.exit(2);
}

async function main() {
  const client = new CosmosClient({ endpoint, key });
  const { database } = await client.databases.createIfNotExists({ id: databaseId });
  const { container } = await database.containers.createIfNotExists({
    id: containerId,
    partitionKey: { paths: [`/${pkField}`], version: 2 },
    throughput: Number(ruArg),
  });

  const operations = [];
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (line.trim() === "") {
      continue;
    }
    const doc = JSON.parse(line);
    operations.push({ operationType: "Upsert", partitionKey: doc[pkField], resourceBody: doc });
  }
  const began = process.hrtime.bigint();
  const results = await container.items.executeBulkOperations(operations);
  const seconds = Number(process.hrtime.bigint() - began) / 1e9;

  const statuses = {};
  let charge = 0;
  for (const r of results) {
    const status = r.response ? r.response.statusCode : r.error ? r.error.code : "none";
    statuses[status] = (statuses[status] || 0) + 1;
    charge += (r.response && r.response.requestCharge) || 0;
  }
  console.log(JSON.stringify({ records: operations.length, seconds, statuses, charge }));
}

main().catch((err) => {
  console.error(`jsbulk: ${err && err.stack ? err.stack : err}`);
  process.exit(1);
});
