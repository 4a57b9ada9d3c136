// Writes the expected records of the CSV corpus with DuckDB, a reader and
// writer independent of the loader: for each hand-made *.csv, DuckDB reads
// it (every column text, "" an empty string, an empty cell NULL, as
// PostgreSQL reads CSV) and writes its rows as NDJSON beside it; and it
// writes duckdb_written.csv itself, with its rows as NDJSON. The test
// (loader/source/formats, TestCSVCorpus) reads each CSV with --csv-strings
// --csv-empty null and expects exactly those rows.
//
// Run from this directory, with @duckdb/node-api installed (npm install
// @duckdb/node-api; it is not a dependency of the project):
//   node generate.mjs
import { DuckDBInstance } from '@duckdb/node-api';
import { readdirSync } from 'node:fs';

const db = await DuckDBInstance.create(':memory:');
const conn = await db.connect();

await conn.run(`CREATE TABLE written AS SELECT * FROM (VALUES
  ('1', 'Once upon ' || chr(13) || chr(10) || 'a time', 'plain'),
  ('2', '', NULL),
  ('3', NULL, ''),
  ('4', 'a "quoted" word', 'comma, inside'),
  ('5', 'lone' || chr(13) || 'cr', 'lf' || chr(10) || 'only'),
  ('6', '  spaced  ', ' x '),
  ('7', 'é ü 漢字', '"'),
  ('8', '9007199254740993', '0.1000000000000000055511151231257827')
) AS t(id, text, note)`);
await conn.run(`COPY written TO 'duckdb_written.csv' (HEADER)`);

for (const f of readdirSync('.').filter((f) => f.endsWith('.csv')).sort()) {
  const out = f.replace(/\.csv$/, '.ndjson');
  await conn.run(`COPY (SELECT * FROM read_csv('${f}', header = true, all_varchar = true,
    delim = ',', quote = '"', escape = '"', allow_quoted_nulls = false, strict_mode = true))
    TO '${out}' (FORMAT json)`);
  console.log(`${f} -> ${out}`);
}
