package parquet

import (
	"testing"

	"github.com/cosmosloader/loader/loader/record"
	"github.com/cosmosloader/loader/loader/source"
)

// legacy.parquet (parquetjs, gen.mjs) holds strings as Hive, Impala and
// old Spark wrote them: byte arrays with no logical type. They are base64,
// as any bytes, unless --binary-as-string reads them as strings; a value
// that is not UTF-8 stays base64 then.
func TestParquetBinaryAsString(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts source.Options
		want []string
	}{
		{"bytes", source.Options{}, []string{
			`{"id":"aDE=","pk":"cDE=","name":"Wm/DqyAiWiI=","addr":{"city":"VHJvbXPDuA=="},"tags":["YQ==","Yg=="]}`,
			`{"id":"aDI=","pk":"cDI=","name":"//4="}`,
		}},
		{"strings", source.Options{BinaryAsString: true}, []string{
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
		opts source.Options
		want []string
	}{
		{"omit", source.Options{}, []string{
			`{"id":"l1","pk":"p1","doc":{"tenant":"acme","a":[1,{"b":null}],"s":"é\""},"iv":"P1Y2M3DT4H5M6.789S","nest":{"j":{"n":[1,2]},"iv":"P1M1DT1S"},"jl":["str",5,{"k":true}]}`,
			`{"id":"l2","pk":"p2"}`,
			`{"id":"l3","pk":"p1","doc":42,"nest":{"j":"text"},"jl":[]}`,
		}},
		{"keep", source.Options{CSVEmptyNull: true}, []string{
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
