package source

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"

	"github.com/cosmosloader/loader/loader/record"
)

// legacy.parquet (parquetjs, gen.mjs) holds strings as Hive, Impala and
// old Spark wrote them: byte arrays with no logical type. They are base64,
// as any bytes, unless --binary-as-string reads them as strings; a value
// that is not UTF-8 stays base64 then.
func TestParquetBinaryAsString(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want []string
	}{
		{"bytes", Options{}, []string{
			`{"id":"aDE=","pk":"cDE=","name":"Wm/DqyAiWiI=","addr":{"city":"VHJvbXPDuA=="},"tags":["YQ==","Yg=="]}`,
			`{"id":"aDI=","pk":"cDI=","name":"//4="}`,
		}},
		{"strings", Options{BinaryAsString: true}, []string{
			`{"id":"h1","pk":"p1","name":"Zoë \"Z\"","addr":{"city":"Tromsø"},"tags":["a","b"]}`,
			`{"id":"h2","pk":"p2","name":"//4="}`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parquetRowsAre(t, "legacy.parquet", tc.opts, tc.want)
		})
	}
}

// logical.parquet is written by parquetjs (testdata/parquet/gen.mjs): JSON
// and INTERVAL columns, at the top, in a struct and in a list. arrow-go
// reads them as bytes, which would be base64.
func TestParquetLogicalTypesExactJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want []string
	}{
		{"omit", Options{}, []string{
			`{"id":"l1","pk":"p1","doc":{"tenant":"acme","a":[1,{"b":null}],"s":"é\""},"iv":"P1Y2M3DT4H5M6.789S","nest":{"j":{"n":[1,2]},"iv":"P1M1DT1S"},"jl":["str",5,{"k":true}]}`,
			`{"id":"l2","pk":"p2"}`,
			`{"id":"l3","pk":"p1","doc":42,"nest":{"j":"text"},"jl":[]}`,
		}},
		{"keep", Options{CSVEmptyNull: true}, []string{
			`{"id":"l1","pk":"p1","doc":{"tenant":"acme","a":[1,{"b":null}],"s":"é\""},"iv":"P1Y2M3DT4H5M6.789S","nest":{"j":{"n":[1,2]},"iv":"P1M1DT1S"},"jl":["str",5,{"k":true}]}`,
			`{"id":"l2","pk":"p2","doc":null,"iv":null,"nest":null,"jl":null}`,
			`{"id":"l3","pk":"p1","doc":42,"iv":null,"nest":{"j":"text","iv":null},"jl":[]}`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := parquetRowsAre(t, "logical.parquet", tc.opts, tc.want)
			m, err := record.NewMapper(record.Config{PartitionKeyPaths: []string{"/doc/tenant"}})
			if err != nil {
				t.Fatal(err)
			}
			for i, rec := range recs {
				// An embedded JSON value's nesting and terms are unknown
				// to the encoder: the mapper must parse the row.
				if rec.Members != nil {
					t.Errorf("row %d: members handed over for a row with a JSON column", i+1)
				}
			}
			doc, err := m.Map(recs[0].Data, nil)
			if err != nil || len(doc.PK) != 1 || doc.PK[0] != "acme" {
				t.Errorf("partition key inside a JSON column: %+v %v", doc.PK, err)
			}
		})
	}
}

// An ENUM column, a JSON map value and INTERVALs, as parquet-mr and Spark
// write them, are found in the schema; BSON and plain bytes are not.
func TestParquetLogicalOf(t *testing.T) {
	bytesNode := func(name string, lt schema.LogicalType) schema.Node {
		return schema.MustPrimitive(schema.NewPrimitiveNodeLogical(name, parquet.Repetitions.Optional, lt, parquet.Types.ByteArray, -1, -1))
	}
	kv := schema.MustGroup(schema.NewGroupNode("key_value", parquet.Repetitions.Repeated, schema.FieldList{
		schema.MustPrimitive(schema.NewPrimitiveNodeLogical("key", parquet.Repetitions.Required, schema.StringLogicalType{}, parquet.Types.ByteArray, -1, -1)),
		bytesNode("value", schema.JSONLogicalType{}),
	}, -1))
	root := schema.MustGroup(schema.NewGroupNode("schema", parquet.Repetitions.Required, schema.FieldList{
		bytesNode("mood", schema.EnumLogicalType{}),
		schema.MustGroup(schema.NewGroupNodeLogical("attrs", parquet.Repetitions.Optional, schema.FieldList{kv}, schema.MapLogicalType{}, -1)),
		schema.MustPrimitive(schema.NewPrimitiveNodeLogical("iv", parquet.Repetitions.Optional, schema.IntervalLogicalType{}, parquet.Types.FixedLenByteArray, 12, -1)),
		bytesNode("bson", schema.BSONLogicalType{}),
		bytesNode("raw", schema.NoLogicalType{}),
	}, -1))
	sc := schema.NewSchema(root)
	man, err := pqarrow.NewSchemaManifest(sc, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]*Logical, len(man.Fields))
	for i := range man.Fields {
		got[i] = LogicalOf(&man.Fields[i], sc, false)
	}
	if got[0] == nil || got[0].kind != kindEnum || got[0].HasJSON() {
		t.Errorf("enum: %+v", got[0])
	}
	if v := got[1].Child(0).Child(1); v == nil || v.kind != kindJSON || !got[1].HasJSON() || got[1].Child(0).Child(0) != nil {
		t.Errorf("map of JSON: %+v", got[1])
	}
	if got[2] == nil || got[2].kind != kindInterval {
		t.Errorf("interval: %+v", got[2])
	}
	if got[3] != nil || got[4] != nil {
		t.Errorf("bson and raw bytes annotated: %+v %+v", got[3], got[4])
	}

	bb := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.Binary)
	bb.AppendStringValues([]string{"happy", "x\xffy", `{"a":1}`, `{"a":`}, nil)
	arr := bb.NewArray()
	defer arr.Release()
	for _, tc := range []struct {
		kind logicalKind
		want []string
	}{
		{kindEnum, []string{`"happy"`, `"x` + "\ufffd" + `y"`, `"{\"a\":1}"`, `"{\"a\":"`}},
		{kindJSON, []string{`"happy"`, `"x` + "\ufffd" + `y"`, `{"a":1}`, `"{\"a\":"`}},
	} {
		put := Binder(arr, false, &Logical{kind: tc.kind})
		for i, want := range tc.want {
			if got := string(put(nil, i)); got != want {
				t.Errorf("kind %d row %d: got %s want %s", tc.kind, i, got, want)
			}
		}
	}
}

func TestParquetIntervalISO8601(t *testing.T) {
	for _, tc := range []struct {
		months, days, ms uint32
		want             string
	}{
		{0, 0, 0, `"PT0S"`},
		{12, 0, 0, `"P1Y"`},
		{0, 7, 0, `"P7D"`},
		{0, 0, 500, `"PT0.5S"`},
		{0, 0, 3_600_000, `"PT1H"`},
		{0, 0, 61_010, `"PT1M1.01S"`},
		{25, 1, 90_000_001, `"P2Y1M1DT25H0.001S"`},
		{1<<32 - 1, 1<<32 - 1, 1<<32 - 1, `"P357913941Y3M4294967295DT1193H2M47.295S"`},
	} {
		v := make([]byte, 12)
		for i, x := range []uint32{tc.months, tc.days, tc.ms} {
			v[4*i], v[4*i+1], v[4*i+2], v[4*i+3] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
		}
		if got := string(appendInterval(nil, v)); got != tc.want {
			t.Errorf("%d months %d days %d ms: got %s want %s", tc.months, tc.days, tc.ms, got, tc.want)
		}
	}
}
