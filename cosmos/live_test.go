package cosmos

import (
	"encoding/base64"
	"net/url"
	"reflect"
	"testing"

	"github.com/cosmosloader/loader/epk"
)

func TestBoundsOf(t *testing.T) {
	mid := epk.SplitEven(2)[1]
	got, err := boundsOf([]pkRange{
		{ID: "2", MinInclusive: mid, MaxExclusive: epk.Max, Parents: []string{"0"}},
		{ID: "0", MinInclusive: epk.Min, MaxExclusive: epk.Max},
		{ID: "1", MinInclusive: epk.Min, MaxExclusive: mid, Parents: []string{"0"}},
	})
	if err != nil || !reflect.DeepEqual(got, []string{epk.Min, mid, epk.Max}) {
		t.Errorf("bounds %v, %v", got, err)
	}
	if _, err := boundsOf([]pkRange{{ID: "1", MinInclusive: epk.Min, MaxExclusive: mid}}); err == nil {
		t.Error("ranges not covering the container were accepted")
	}
}

// The signature is the documented example's: the token Microsoft's
// "Access control in the Azure Cosmos DB SQL API" page derives.
func TestSignature(t *testing.T) {
	key, _ := base64.StdEncoding.DecodeString("dsZQi3KtZmCv1ljt3VNWNm7sQUF1y5rJfC6kv5JiwvW0EndXdDku/dkKBp8/ufDToSxLzR4y+O/0H/t4bQtVNw==")
	got, _ := url.QueryUnescape(signature(key, "GET", "dbs", "dbs/ToDoList", "Thu, 27 Apr 2017 00:51:12 GMT"))
	if want := "type=master&ver=1.0&sig=c09PEVJrgp2uQRkr934kFbTqhByc7TVr3OHyqlu+c+c="; got != want {
		t.Errorf("token %s, want %s", got, want)
	}
}
