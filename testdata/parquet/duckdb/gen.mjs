// Writes the DuckDB fixtures of the Parquet reader's tests, and DuckDB's own
// reading of them (rows.duckdb.json, one JSON object a line, as DuckDB's
// COPY … (FORMAT json) writes it; DuckDB reads every file to the same
// lines, which this script checks): the loader must load the same rows
// with the same values, within its documented type mapping. Run once, in a
// temporary directory, never added to the repository's package.json:
//
//   cd "$(mktemp -d)" && npm install --no-save --no-package-lock @duckdb/node-api@1.5.6-r.1 \
//     && node /path/to/testdata/parquet/duckdb/gen.mjs /path/to/testdata/parquet/duckdb
//
// The files are committed.
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(path.join(process.cwd(), 'x.js'));
const { DuckDBInstance } = require('@duckdb/node-api');
const out = path.resolve(process.argv[2] || '.');

const db = await DuckDBInstance.create(':memory:');
const c = await db.connect();
await c.run("SET TimeZone = 'UTC'");

// 300 rows: integers of every width, doubles, decimals of both storage
// widths, strings that repeat (dictionary pages) and that do not, dates,
// timestamps near the edges of what each unit holds, nested lists,
// structs and maps, and nulls in each.
await c.run(`CREATE TABLE t AS
SELECT
  i AS id,
  'p' || (i % 7) AS pk,
  (i % 128)::TINYINT AS i8,
  (i * 37 % 32768)::SMALLINT AS i16,
  (i * 2654435761 % 2147483647)::INTEGER AS i32,
  CASE WHEN i % 5 = 0 THEN NULL ELSE i * 9007199254 END AS i64,
  (i * 40503)::UINTEGER AS u32,
  i / 8.0 AS f64,
  (i * 1.25)::FLOAT AS f32,
  (i * 1.01)::DECIMAL(9, 2) AS d9,
  (i * 123456789.123456)::DECIMAL(18, 6) AS d18,
  CASE WHEN i % 3 = 0 THEN 'red' WHEN i % 3 = 1 THEN 'green' ELSE 'blue' END AS colour,
  'row ' || i || ' ' || repeat('é', i % 5) AS label,
  i % 2 = 0 AS even,
  DATE '1970-01-01' + (i * 97 - 30000)::INTEGER AS day,
  TIMESTAMP '2026-11-24 05:08:27.123456' + to_microseconds(i * 3600000001) AS ts,
  make_timestamp_ms(i * 86400000 * 170 - 90000000000000)::TIMESTAMP_MS AS ts_ms,
  CASE WHEN i % 4 = 0 THEN NULL ELSE [i, i + 1, NULL][1:(i % 3) + 1] END AS ints,
  {'city': 'c' || (i % 11), 'zip': i % 1000, 'tags': ['a' || (i % 3), 'b']} AS addr,
  MAP(['k' || (i % 3), 'x'], [i, i * 2]) AS attrs,
  [{'n': i % 4, 'w': i / 2.0}] AS parts
FROM range(300) r(i)`);

const files = [
  ['snappy', "COMPRESSION snappy"],
  ['gzip', "COMPRESSION gzip"],
  ['zstd', "COMPRESSION zstd"],
  ['lz4', "COMPRESSION lz4"],          // LZ4_RAW
  ['brotli', "COMPRESSION brotli"],
  ['uncompressed', "COMPRESSION uncompressed"],
  ['v2-snappy', "COMPRESSION snappy, PARQUET_VERSION v2"], // DATA_PAGE_V2, delta encodings
  ['v2-zstd', "COMPRESSION zstd, PARQUET_VERSION v2"],
];
const fs = require('node:fs');
const os = require('node:os');
let reference;
for (const [name, opts] of files) {
  const file = path.join(out, `${name}.parquet`);
  const json = path.join(os.tmpdir(), `${name}.duckdb.json`);
  await c.run(`COPY t TO '${file}' (FORMAT parquet, ${opts}, ROW_GROUP_SIZE 128)`);
  await c.run(`COPY (SELECT * FROM '${file}') TO '${json}' (FORMAT json)`);
  const text = fs.readFileSync(json, 'utf8');
  if (reference === undefined) {
    reference = text;
    fs.writeFileSync(path.join(out, 'rows.duckdb.json'), text);
  } else if (text !== reference) {
    throw new Error(`DuckDB reads ${name}.parquet differently`);
  }
}
console.log('wrote', files.length, 'files to', out);
