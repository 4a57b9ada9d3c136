// Starts @vercel/cosmosdb-server over plain HTTP with keep-alive on.
//
// Its CLI always answers "connection: close", so every request through the
// Go proxy would open a new TCP connection: slower, and it leaves thousands
// of sockets in TIME-WAIT during a load test. The package's API takes the
// keepAlive option the CLI does not expose.
//
// usage: node cosmosdb-server.js HOST PORT
"use strict";

const { createHttpServer } = require("@vercel/cosmosdb-server");

const host = process.argv[2];
const port = Number(process.argv[3]);
const server = createHttpServer({ keepAlive: true });
// The Go side closes idle connections first; a server-side timeout could
// close one just as a request is sent on it.
server.keepAliveTimeout = 0;
server.listen(port, host, () => {
  console.log(`Ready to accept HTTP connections at ${host}:${port}`);
});
for (const signal of ["SIGINT", "SIGTERM"]) {
  process.once(signal, () => process.exit(0));
}
