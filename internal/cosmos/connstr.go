package cosmos

import "strings"

// SplitConnectionString returns the AccountEndpoint and AccountKey of a
// connection string ("AccountEndpoint=https://…;AccountKey=…;"), each
// trimmed, empty when absent. A key's base64 may end in '=': a part's value
// is everything after its first '='.
func SplitConnectionString(cs string) (endpoint, key string) {
	for _, part := range strings.Split(cs, ";") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "accountendpoint":
			endpoint = strings.TrimSpace(v)
		case "accountkey":
			key = strings.TrimSpace(v)
		}
	}
	return endpoint, key
}
