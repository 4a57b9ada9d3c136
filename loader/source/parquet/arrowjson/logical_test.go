package arrowjson

import (
	"math"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/arrow-go/v18/parquet/schema"
)

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

// The digit counts against strconv, around every power of ten and of two.
func TestIntLenMatchesStrconv(t *testing.T) {
	check := func(v int64) {
		if got, want := IntLen(v), len(strconv.FormatInt(v, 10)); got != want {
			t.Fatalf("intLen(%d) = %d, want %d", v, got, want)
		}
		if v >= 0 {
			if got, want := UintLen(uint64(v)), len(strconv.FormatUint(uint64(v), 10)); got != want {
				t.Fatalf("uintLen(%d) = %d, want %d", v, got, want)
			}
		}
	}
	for p := int64(1); p <= 1e18; p *= 10 {
		for _, v := range []int64{p - 1, p, p + 1} {
			check(v)
			check(-v)
		}
	}
	check(math.MaxInt64)
	check(math.MinInt64)
	for k := range 64 {
		p := uint64(1) << k
		for _, u := range []uint64{p - 1, p, p + 1} {
			if got, want := UintLen(u), len(strconv.FormatUint(u, 10)); got != want {
				t.Fatalf("uintLen(%d) = %d, want %d", u, got, want)
			}
		}
	}
	for _, u := range []uint64{1e19 - 1, 1e19, math.MaxUint64} {
		if got, want := UintLen(u), len(strconv.FormatUint(u, 10)); got != want {
			t.Fatalf("uintLen(%d) = %d, want %d", u, got, want)
		}
	}
}
