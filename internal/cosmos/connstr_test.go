package cosmos

import "testing"

func TestSplitConnectionString(t *testing.T) {
	for _, c := range []struct{ cs, endpoint, key string }{
		{"AccountEndpoint=https://a.documents.azure.com:443/;AccountKey=abc==;", "https://a.documents.azure.com:443/", "abc=="},
		{" accountkey = k= ; ACCOUNTENDPOINT= http://127.0.0.1:8081/ ", "http://127.0.0.1:8081/", "k="},
		{"AccountEndpoint=https://a/", "https://a/", ""},
		{"garbage", "", ""},
	} {
		ep, key := SplitConnectionString(c.cs)
		if ep != c.endpoint || key != c.key {
			t.Errorf("SplitConnectionString(%q) = %q, %q; want %q, %q", c.cs, ep, key, c.endpoint, c.key)
		}
	}
}
