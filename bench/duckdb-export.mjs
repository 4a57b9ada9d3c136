// Writes an export as DuckDB writes one — Snappy, a page per column chunk,
// row groups of 122,880 rows, dictionaries for repetitive columns — for the
// Parquet benchmarks (LOADER_BENCH_PARQUET_FILES): another writer's file,
// with a DECIMAL(12,2), timestamps, dates, nulls, a list and a struct.
// About 84 bytes of Parquet per row. Run a copy of it in a temporary
// directory (Node looks for the package beside the script); it is not part
// of the repository's package.json:
//
//   cd "$(mktemp -d)" && npm install --no-save --no-package-lock @duckdb/node-api@1.5.6-r.1 \
//     && cp /path/to/bench/duckdb-export.mjs . && node duckdb-export.mjs 2000000 /tmp/export.parquet
//
// A fourth argument, sorted, writes the same rows sorted by tenant (the
// partition key of the benchmarks) and id, as a key-sorted export: the
// segmented Parquet import figures load
// `duckdb-export.mjs 2000000 /tmp/sorted.parquet sorted`. ROW_GROUP_SIZE
// in the environment sets DuckDB's row group size: the reader's DuckDB
// fixture is `ROW_GROUP_SIZE=500 node duckdb-export.mjs 1200
// testdata/parquet/duckdb.parquet` (three row groups, each its own
// dictionaries).
import { DuckDBInstance } from '@duckdb/node-api';

const rows = parseInt(process.argv[2] || '2000000', 10);
const out = process.argv[3] || 'export.parquet';
const sorted = process.argv[4] === 'sorted';
const rowGroup = process.env.ROW_GROUP_SIZE || (sorted ? '20000' : '');
const db = await DuckDBInstance.create(':memory:');
const c = await db.connect();
await c.run(`COPY (
  SELECT
    'ord-' || lpad(i::VARCHAR, 10, '0') AS id,
    'tenant-' || (hash(i) % 500)::VARCHAR AS tenant,
    (hash(i * 7) % 1000000)::BIGINT AS customer_id,
    ((hash(i * 3) % 100000) / 100.0)::DECIMAL(12,2) AS amount,
    (hash(i * 5) % 10 + 1)::INTEGER AS quantity,
    round((hash(i * 19) % 100000) / 100.0, 2)::DOUBLE AS price,
    (hash(i * 23) % 1000000007) / 1000000007.0 AS score,
    ['new','paid','shipped','cancelled'][((hash(i) % 4) + 1)::BIGINT] AS status,
    TIMESTAMP '2026-01-01' + to_seconds((hash(i * 11) % 30000000)::BIGINT) AS created,
    DATE '2026-01-01' + (hash(i * 13) % 300)::INTEGER AS day,
    md5(i::VARCHAR) AS checksum,
    'lorem ipsum dolor ' || (hash(i) % 1000)::VARCHAR || ' sit amet consectetur' AS description,
    (hash(i) % 3 = 0) AS flagged,
    CASE WHEN hash(i) % 5 = 0 THEN NULL ELSE 'note ' || i::VARCHAR END AS note,
    ['a' || (hash(i) % 10)::VARCHAR, 'b' || (hash(i * 2) % 10)::VARCHAR] AS tags,
    {'street': (hash(i) % 300)::VARCHAR || ' Main St',
     'city': ['Lisbon','Porto','Madrid','Paris'][((hash(i * 17) % 4) + 1)::BIGINT],
     'zip': lpad((hash(i) % 99999)::VARCHAR, 5, '0')} AS address
  FROM range(${rows}) t(i)
  ${sorted ? 'ORDER BY tenant, id' : ''}
) TO '${out}' (FORMAT parquet${rowGroup ? ', ROW_GROUP_SIZE ' + rowGroup : ''})`);
