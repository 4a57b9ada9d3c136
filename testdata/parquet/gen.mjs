// Writes the Parquet fixtures of the reader's tests with an independent
// writer (the pure-JavaScript @dsnp/parquetjs, not arrow-go). Run once, in a
// temporary directory, never added to the repository's package.json:
//
//   cd "$(mktemp -d)" && npm install --no-save --no-package-lock @dsnp/parquetjs@1.8.9 \
//     && node /path/to/testdata/parquet/gen.mjs /path/to/testdata/parquet
//
// The files are committed; the expected JSON lives in the Go tests.
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const require = createRequire(path.join(process.cwd(), 'x.js'));
const parquet = require('@dsnp/parquetjs');
const out = process.argv[2] || '.';

// types.parquet: every primitive the writer has, nulls, nested types, three
// row groups of 2, 2 and 1 rows.
const types = new parquet.ParquetSchema({
  id: { type: 'UTF8' },
  pk: { type: 'UTF8' },
  i32: { type: 'INT32', optional: true },
  i64: { type: 'INT64', optional: true },
  i8: { type: 'INT_8', optional: true },
  u32: { type: 'UINT_32', optional: true },
  f32: { type: 'FLOAT', optional: true },
  f64: { type: 'DOUBLE', optional: true },
  ok: { type: 'BOOLEAN', optional: true },
  s: { type: 'UTF8', optional: true },
  bin: { type: 'BYTE_ARRAY', optional: true },
  ts: { type: 'TIMESTAMP_MILLIS', optional: true },
  tsus: { type: 'TIMESTAMP_MICROS', optional: true },
  day: { type: 'DATE', optional: true },
  price: { type: 'DECIMAL', precision: 10, scale: 2, optional: true },
  big: { type: 'DECIMAL', precision: 18, scale: 1, optional: true },
  tags: parquet.ParquetFieldBuilder.createListField('UTF8'),
  addr: {
    optional: true,
    fields: {
      city: { type: 'UTF8', optional: true },
      zip: { type: 'INT32', optional: true },
    },
  },
  attrs: {
    type: 'MAP',
    optional: true,
    fields: {
      key_value: {
        repeated: true,
        fields: {
          key: { type: 'UTF8' },
          value: { type: 'INT64', optional: true },
        },
      },
    },
  },
});

const rows = [
  {
    id: 'a1', pk: 'p1', i32: -7, i64: 9007199254740993n, i8: -128, u32: 2147483647, f32: 1.5, f64: 0.1,
    ok: true, s: 'héllo "quoted"\n\ttab', bin: Buffer.from([0, 1, 2, 255]),
    ts: new Date('2026-11-24T05:08:27.123Z'), tsus: 1764047307123456n, day: new Date('2026-02-28T00:00:00Z'),
    price: 123.5, big: 2 ** 53 / 10,
    tags: { list: [{ element: 'x' }, { element: 'y' }] },
    addr: { city: 'Oslo', zip: 150 },
    attrs: { key_value: [{ key: 'a', value: 1n }, { key: 'b', value: 2n }] },
  },
  { id: 'a2', pk: 'p2' }, // every optional column null
  {
    id: 'a3', pk: 'p1', i32: 0, i64: 0n, f64: -2.5e-300, ok: false, s: '',
    tags: { list: [{ element: 'z' }, {}] }, // a null element
    addr: { city: null },
    attrs: { key_value: [{ key: 'n', value: null }] },
  },
  { id: 'a4', pk: 'p3', price: -0.5, tags: { list: [] }, addr: {} },
  { id: 'a5', pk: 'p2', s: '日本語', day: new Date('1969-12-31T00:00:00Z') },
];
{
  const w = await parquet.ParquetWriter.openFile(types, path.join(out, 'types.parquet'));
  w.setRowGroupSize(2);
  for (const r of rows) await w.appendRow(r);
  await w.close();
}

// rows.parquet: 250 flat rows in row groups of 100, 100 and 50, for resume
// and end-to-end tests.
const flat = new parquet.ParquetSchema({
  id: { type: 'UTF8' },
  pk: { type: 'UTF8' },
  n: { type: 'INT64' },
  name: { type: 'UTF8', optional: true },
});
{
  const w = await parquet.ParquetWriter.openFile(flat, path.join(out, 'rows.parquet'));
  w.setRowGroupSize(100);
  for (let i = 1; i <= 250; i++) {
    await w.appendRow({ id: `r${i}`, pk: `k${i % 7}`, n: BigInt(i), name: i % 10 === 0 ? undefined : `row ${i}` });
  }
  await w.close();
}

// truncated.parquet: rows.parquet cut in the middle (no footer).
{
  const b = fs.readFileSync(path.join(out, 'rows.parquet'));
  fs.writeFileSync(path.join(out, 'truncated.parquet'), b.subarray(0, Math.floor(b.length / 2)));
}

// logical.parquet: byte arrays with a logical type that says what they
// hold: JSON at the top level, in a struct and in a list, and INTERVAL.
const logical = new parquet.ParquetSchema({
  id: { type: 'UTF8' },
  pk: { type: 'UTF8' },
  doc: { type: 'JSON', optional: true },
  iv: { type: 'INTERVAL', optional: true },
  nest: {
    optional: true,
    fields: {
      j: { type: 'JSON', optional: true },
      iv: { type: 'INTERVAL', optional: true },
    },
  },
  jl: parquet.ParquetFieldBuilder.createListField('JSON'),
});
{
  const w = await parquet.ParquetWriter.openFile(logical, path.join(out, 'logical.parquet'));
  await w.appendRow({
    id: 'l1', pk: 'p1', doc: { tenant: 'acme', a: [1, { b: null }], s: 'é"' },
    iv: { months: 14, days: 3, milliseconds: 14706789 },
    nest: { j: { n: [1, 2] }, iv: { months: 1, days: 1, milliseconds: 1000 } },
    jl: { list: [{ element: 'str' }, { element: 5 }, { element: { k: true } }] },
  });
  await w.appendRow({ id: 'l2', pk: 'p2' });
  await w.appendRow({ id: 'l3', pk: 'p1', doc: 42, nest: { j: 'text' }, jl: { list: [] } });
  await w.close();
}

// legacy.parquet: strings as Hive, Impala and old Spark wrote them, byte
// arrays with no logical type (read as strings with --binary-as-string),
// at the top level, in a struct and in a list; one value is not UTF-8.
const legacy = new parquet.ParquetSchema({
  id: { type: 'BYTE_ARRAY' },
  pk: { type: 'BYTE_ARRAY' },
  name: { type: 'BYTE_ARRAY', optional: true },
  addr: {
    optional: true,
    fields: { city: { type: 'BYTE_ARRAY', optional: true } },
  },
  tags: parquet.ParquetFieldBuilder.createListField('BYTE_ARRAY'),
});
{
  const w = await parquet.ParquetWriter.openFile(legacy, path.join(out, 'legacy.parquet'));
  await w.appendRow({
    id: Buffer.from('h1'), pk: Buffer.from('p1'), name: Buffer.from('Zoë "Z"'),
    addr: { city: Buffer.from('Tromsø') },
    tags: { list: [{ element: Buffer.from('a') }, { element: Buffer.from('b') }] },
  });
  await w.appendRow({ id: Buffer.from('h2'), pk: Buffer.from('p2'), name: Buffer.from([0xff, 0xfe]) });
  await w.close();
}

// ../delta/events: a Delta Lake table partitioned by region, as Spark
// writes one. Version 0 adds region=eu/part-old and region=us/part-0;
// version 1 removes part-old and adds region=eu/part-0; a checkpoint at
// version 1 (written here by parquetjs, as Spark writes one: a column per
// action kind); version 2 adds region=us/part-1. The current version is
// eu/part-0, us/part-0 and us/part-1: part-old's rows must not load.
{
  const table = path.join(out, '..', 'delta', 'events');
  const log = path.join(table, '_delta_log');
  fs.mkdirSync(log, { recursive: true });
  const data = new parquet.ParquetSchema({ id: { type: 'UTF8' }, tenant: { type: 'UTF8' }, n: { type: 'INT64' } });
  const files = { 'region=eu/part-old.parquet': 'old', 'region=us/part-0.parquet': 'us0', 'region=eu/part-0.parquet': 'eu0', 'region=us/part-1.parquet': 'us1' };
  for (const [rel, tag] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(table, rel)), { recursive: true });
    const w = await parquet.ParquetWriter.openFile(data, path.join(table, rel));
    for (let i = 0; i < 3; i++) await w.appendRow({ id: `${tag}-${i}`, tenant: `t${i}`, n: BigInt(i) });
    await w.close();
  }
  const protocol = { protocol: { minReaderVersion: 1, minWriterVersion: 2 } };
  const metaData = { metaData: { id: 'e1', format: { provider: 'parquet', options: {} }, schemaString: '{"type":"struct","fields":[]}', partitionColumns: ['region'], configuration: {}, createdTime: 1764000000000 } };
  const add = (rel, region) => ({ add: { path: rel, partitionValues: { region }, size: 1, modificationTime: 1764000000000, dataChange: true } });
  const commit = (v, actions) => fs.writeFileSync(path.join(log, String(v).padStart(20, '0') + '.json'), actions.map((a) => JSON.stringify(a)).join('\n') + '\n');
  commit(0, [protocol, metaData, add('region=eu/part-old.parquet', 'eu'), add('region=us/part-0.parquet', 'us')]);
  commit(1, [{ remove: { path: 'region=eu/part-old.parquet', deletionTimestamp: 1764000001000, dataChange: true } }, add('region=eu/part-0.parquet', 'eu')]);
  commit(2, [add('region=us/part-1.parquet', 'us')]);
  const cp = new parquet.ParquetSchema({
    txn: { optional: true, fields: { appId: { type: 'UTF8', optional: true }, version: { type: 'INT64', optional: true } } },
    add: {
      optional: true,
      fields: {
        path: { type: 'UTF8', optional: true },
        partitionValues: { type: 'MAP', optional: true, fields: { key_value: { repeated: true, fields: { key: { type: 'UTF8' }, value: { type: 'UTF8', optional: true } } } } },
        size: { type: 'INT64', optional: true },
        modificationTime: { type: 'INT64', optional: true },
        dataChange: { type: 'BOOLEAN', optional: true },
      },
    },
    remove: { optional: true, fields: { path: { type: 'UTF8', optional: true }, deletionTimestamp: { type: 'INT64', optional: true }, dataChange: { type: 'BOOLEAN', optional: true } } },
    metaData: {
      optional: true,
      fields: {
        id: { type: 'UTF8', optional: true },
        schemaString: { type: 'UTF8', optional: true },
        partitionColumns: parquet.ParquetFieldBuilder.createListField('UTF8'),
        createdTime: { type: 'INT64', optional: true },
      },
    },
    protocol: { optional: true, fields: { minReaderVersion: { type: 'INT32', optional: true }, minWriterVersion: { type: 'INT32', optional: true } } },
  });
  const w = await parquet.ParquetWriter.openFile(cp, path.join(log, '00000000000000000001.checkpoint.parquet'));
  await w.appendRow({ protocol: { minReaderVersion: 1, minWriterVersion: 2 } });
  await w.appendRow({ metaData: { id: 'e1', schemaString: '{"type":"struct","fields":[]}', partitionColumns: { list: [{ element: 'region' }] }, createdTime: 1764000000000n } });
  for (const [rel, region] of [['region=eu/part-0.parquet', 'eu'], ['region=us/part-0.parquet', 'us']]) {
    await w.appendRow({ add: { path: rel, partitionValues: { key_value: [{ key: 'region', value: region }] }, size: 1n, modificationTime: 1764000000000n, dataChange: false } });
  }
  await w.appendRow({ remove: { path: 'region=eu/part-old.parquet', deletionTimestamp: 1764000001000n, dataChange: true } });
  await w.close();
  fs.writeFileSync(path.join(log, '_last_checkpoint'), JSON.stringify({ version: 1, size: 5 }) + '\n');
}
