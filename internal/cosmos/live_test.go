package cosmos

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"

	"github.com/cosmosloader/loader/internal/epk"
	"github.com/cosmosloader/loader/loader"
)

func TestBoundsOf(t *testing.T) {
	mid := epk.SplitEven(2)[1]
	got, ids, err := boundsOf([]pkRange{
		{ID: "2", MinInclusive: mid, MaxExclusive: epk.Max, Parents: []string{"0"}},
		{ID: "0", MinInclusive: epk.Min, MaxExclusive: epk.Max},
		{ID: "1", MinInclusive: epk.Min, MaxExclusive: mid, Parents: []string{"0"}},
	})
	if err != nil || !reflect.DeepEqual(got, []string{epk.Min, mid, epk.Max}) || !reflect.DeepEqual(ids, []string{"1", "2"}) {
		t.Errorf("bounds %v, ids %v, %v", got, ids, err)
	}
	// @vercel/cosmosdb-server's range ids are numbers.
	var feed struct{ PartitionKeyRanges []pkRange }
	if err := json.Unmarshal([]byte(`{"PartitionKeyRanges":[{"id":0,"minInclusive":"","maxExclusive":"FF","parents":[]}]}`), &feed); err != nil {
		t.Fatal(err)
	}
	if _, ids, err := boundsOf(feed.PartitionKeyRanges); err != nil || !reflect.DeepEqual(ids, []string{"0"}) {
		t.Errorf("numeric range id: ids %v, %v", ids, err)
	}
	if _, _, err := boundsOf([]pkRange{{ID: "1", MinInclusive: epk.Min, MaxExclusive: mid}}); err == nil {
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

type staticToken struct{}

func (staticToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: "entra-token", ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// offerServer answers what azcosmos sends to replace a container's
// throughput (the container, the offer query, the offer) and refuses the
// replacement itself as Cosmos DB does: 403 with substatus 5300 for a
// Microsoft Entra ID token, 403 for a key when the account disallows
// metadata writes with keys.
func offerServer(t *testing.T) *httptest.Server {
	offer := `{"id":"of1","_rid":"of1","_self":"offers/of1/","resource":"dbs/d/colls/c/","offerResourceId":"crid","offerType":"Invalid","offerVersion":"V2","content":{"offerThroughput":400}}`
	var srv *httptest.Server
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/":
			writeAccount(w, srv.URL+"/")
		case r.Method == http.MethodGet && r.URL.Path == "/dbs/d/colls/c":
			io.WriteString(w, `{"id":"c","_rid":"crid","_self":"dbs/d/colls/c/","partitionKey":{"paths":["/k"],"kind":"Hash","version":2}}`)
		case r.Method == http.MethodPost && r.URL.Path == "/offers":
			io.WriteString(w, `{"_rid":"","_count":1,"Offers":[`+offer+`]}`)
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/offers/of1"):
			io.WriteString(w, offer)
		case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/offers/of1"):
			if strings.Contains(r.Header.Get("Authorization"), "type%3Daad") || strings.Contains(r.Header.Get("Authorization"), "type=aad") {
				w.Header().Set("x-ms-substatus", "5300")
				w.WriteHeader(http.StatusForbidden)
				io.WriteString(w, `{"code":"Forbidden","message":"Request blocked by Auth acct : The given request [PUT /offers/of1] cannot be authorized by AAD token in data plane. Learn more: https://aka.ms/cosmos-native-rbac."}`)
				return
			}
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, `{"code":"Forbidden","message":"Operation 'PUT' on resource 'offers' is not allowed through Azure Cosmos DB endpoint. Please switch on such operations for your account, or perform this operation through Azure Resource Manager, Azure Portal, Azure CLI or Azure Powershell"}`)
		default:
			t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestReplaceThroughputRefusedSaysWhy(t *testing.T) {
	srv := offerServer(t)
	opts := &azcosmos.ClientOptions{ClientOptions: azcore.ClientOptions{
		Retry: policy.RetryOptions{MaxRetries: -1}, Transport: srv.Client()}}
	key := base64.StdEncoding.EncodeToString([]byte("test-key"))
	for _, tt := range []struct {
		name  string
		entra bool
		want  []string
	}{
		{"Microsoft Entra ID", true, []string{"needs key authentication", "--key or --connection-string", "Entra ID data-plane roles cannot change throughput", "cannot be authorized by AAD token"}},
		{"a key the account refuses for metadata writes", false, []string{"refuses throughput changes made with its keys", "disableKeyBasedMetadataWriteAccess", "Azure portal", "not allowed through Azure Cosmos DB endpoint"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var client *azcosmos.Client
			var err error
			var meta *metaAuth
			if tt.entra {
				client, err = azcosmos.NewClient(srv.URL+"/", staticToken{}, opts)
			} else {
				var cred azcosmos.KeyCredential
				if cred, err = azcosmos.NewKeyCredential(key); err == nil {
					client, err = azcosmos.NewClientWithKey(srv.URL+"/", cred, opts)
				}
				meta = newMetaAuth(loader.TargetOptions{Endpoint: srv.URL + "/", Key: key})
			}
			if err != nil {
				t.Fatal(err)
			}
			cc, err := client.NewContainer("d", "c")
			if err != nil {
				t.Fatal(err)
			}
			c := &container{cc: cc, db: "d", coll: "c", meta: meta}
			err = c.ReplaceThroughput(context.Background(), loader.Throughput{RU: 4000})
			if err == nil {
				t.Fatal("a refused throughput change succeeded")
			}
			if errors.Is(err, loader.ErrThroughputForbidden) != tt.entra {
				t.Errorf("ErrThroughputForbidden = %v: %v", !tt.entra, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message lacks %q: %v", w, err)
				}
			}
			if strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "entra-token") {
				t.Errorf("message spans lines or shows the token: %q", err)
			}
		})
	}
}
