package cosmos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cosmosloader/loader/internal/emulator"
	"github.com/cosmosloader/loader/internal/emulator/emulatortest"
	"github.com/cosmosloader/loader/loader"
)

func TestFrameBatchIsTheSDKsBatchBody(t *testing.T) {
	docs := []loader.Document{{Body: []byte(`{"id":"a","pk":"p"}`)}, {Body: []byte(`{"id":"b", "pk":"p","s":"<&>"}`)}}
	got := frameBatch("Create", docs, false)
	want := `[{"operationType":"Create","resourceBody":{"id":"a","pk":"p"}},{"operationType":"Create","resourceBody":{"id":"b", "pk":"p","s":"<&>"}}]`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if !json.Valid(got) || cap(got) != len(got) {
		t.Errorf("valid %v, len %d cap %d", json.Valid(got), len(got), cap(got))
	}
}

func connectEmulator(t *testing.T) *loader.Target {
	t.Helper()
	srv := emulatortest.Start(t, emulator.Options{})
	tg, err := Connect(context.Background(), loader.TargetOptions{Endpoint: srv.URL(), Key: srv.Key(),
		Database: "db", Container: "c", CreateContainer: true, PartitionKey: []string{"/pk"}, CreateRU: 10000})
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func batchDocs(ids ...string) []loader.Document {
	docs := make([]loader.Document, len(ids))
	for i, id := range ids {
		docs[i] = loader.Document{ID: id, PK: []any{"p"}, Body: []byte(fmt.Sprintf(`{"id":%q,"pk":"p","n":%d}`, id, i))}
	}
	return docs
}

func TestWriteBatchSendsTheDocumentsAndReadsEachResult(t *testing.T) {
	tg := connectEmulator(t)
	ctx := context.Background()
	up := tg.Writer.Sink(loader.ModeUpsert).(loader.BatchSink)
	out := up.WriteBatch(ctx, batchDocs("a", "b", "c"))
	if out.Status != http.StatusOK || len(out.Ops) != 3 {
		t.Fatalf("upsert batch: %+v", out)
	}
	sum := 0.0
	for i, op := range out.Ops {
		if op.Status != http.StatusCreated || op.Charge <= 0 {
			t.Errorf("op %d: %+v", i, op)
		}
		sum += op.Charge
	}
	if d := sum - out.Charge; d > 0.05 || d < -0.05 {
		t.Errorf("batch charge %v, sum of operations %v", out.Charge, sum)
	}
	// Written as sent: a point write of the same id in create mode conflicts.
	if o := tg.Writer.Sink(loader.ModeCreate).Write(ctx, batchDocs("b")[0]); o.Status != http.StatusConflict {
		t.Errorf("create b after the batch: %+v", o)
	}

	// Create mode, one id taken: 207, that operation's 409 with a reason,
	// 424 for the others, nothing applied.
	cr := tg.Writer.Sink(loader.ModeCreate).(loader.BatchSink)
	out = cr.WriteBatch(ctx, batchDocs("x", "a", "y"))
	var got []int
	for _, op := range out.Ops {
		got = append(got, op.Status)
	}
	if out.Status != http.StatusMultiStatus || fmt.Sprint(got) != "[424 409 424]" {
		t.Fatalf("create batch with a taken id: status %d, ops %v", out.Status, got)
	}
	if !strings.Contains(out.Ops[1].Message, "409 Conflict (in a transactional batch)") || out.Ops[0].Message != "" {
		t.Errorf("messages %q, %q", out.Ops[0].Message, out.Ops[1].Message)
	}
	if o := tg.Writer.Sink(loader.ModeCreate).Write(ctx, batchDocs("x")[0]); o.Status != http.StatusCreated {
		t.Errorf("x was applied by the refused batch: %+v", o)
	}

	// A refusal of the whole request is the SDK's error, as before: 101
	// operations.
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprint("m", i)
	}
	if out := up.WriteBatch(ctx, batchDocs(many...)); out.Status != http.StatusBadRequest || len(out.Ops) != 0 {
		t.Errorf("batch of 101: status %d, %d ops", out.Status, len(out.Ops))
	}
}

func TestScanResultsReadsWhatEncodingJSONReads(t *testing.T) {
	for _, tc := range []struct {
		in   string
		fast bool // read by scanResults, not handed to encoding/json
	}{
		{`[{"statusCode":201,"requestCharge":10.29,"eTag":"\"0a00\""},{"statusCode":200,"requestCharge":20.58,"eTag":"x"}]`, false},
		{`[{"statusCode":201,"requestCharge":10.29,"eTag":"0a00"},{"statusCode":200,"requestCharge":2.058e1,"eTag":"x"}]`, true},
		{" [ { \"statusCode\" : 424 , \"requestCharge\" : 0 } ,\n{\"statusCode\":409,\"requestCharge\":1.24} ] ", true},
		{`[]`, true},
		{`[{}]`, true},
		{`[{"statusCode":400,"requestCharge":1.24,"resourceBody":{"code":"BadRequest","message":"no id"}}]`, false},
		{`[{"statusCode":null}]`, false},
		{`[{"statusCode":"201"}]`, false},
		{`[{"stAtusCode":""}]`, false},
		{`[{"statusCode":201,}]`, false},
		{`[{"statusCode":201}`, false},
		{`[{"statusCode":201}] x`, false},
		{`{"statusCode":201}`, false},
	} {
		got := scanResults([]byte(tc.in))
		if (got != nil) != tc.fast {
			t.Errorf("%s: scanned %v, want %v", tc.in, got != nil, tc.fast)
		}
		if got == nil {
			continue
		}
		var want []batchResult
		if err := json.Unmarshal([]byte(tc.in), &want); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: scanned %v, encoding/json %v", tc.in, got, want)
		}
	}
}

func FuzzScanResults(f *testing.F) {
	f.Add(`[{"statusCode":201,"requestCharge":10.29,"eTag":"0a00"}]`)
	f.Add(`[{"statusCode":424,"requestCharge":0},{"statusCode":409,"requestCharge":1.24}]`)
	f.Fuzz(func(t *testing.T, in string) {
		got := scanResults([]byte(in))
		if got == nil {
			return
		}
		var want []batchResult
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatalf("scanned %q, which encoding/json refuses: %v", in, err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%q: scanned %v, encoding/json %v", in, got, want)
		}
	})
}

// The SDK reads the account document on the batch's own context when the
// client has not read it yet (and refreshes it there later): that request
// must pass the batch body policy untouched.
func TestBatchBodyPolicyLeavesTheAccountReadAlone(t *testing.T) {
	srv := newBulkServer(t)
	srv.answers(http.StatusOK, nil, `[{"statusCode":201,"requestCharge":5}]`)
	s := srv.container(t, false).Sink(loader.ModeUpsert).(loader.BatchSink)
	docs := batchDocs("a")
	out := s.WriteBatch(context.Background(), docs)
	if out.Status != http.StatusOK || len(out.Ops) != 1 || out.Ops[0].Status != http.StatusCreated {
		t.Errorf("outcome %+v", out)
	}
	if want := frameBatch("Upsert", docs, false); string(srv.body) != string(want) {
		t.Errorf("body %s, want %s", srv.body, want)
	}
}
