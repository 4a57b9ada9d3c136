package record

import (
	"encoding/json"
	"testing"
)

// AppendJSONString is shared by generated ids and the CSV reader: every
// ASCII character, and text beyond it, must round-trip through encoding/json.
func TestAppendJSONString(t *testing.T) {
	for c := 0; c < 0x80; c++ {
		s := string(AppendJSONString(nil, string(rune(c))))
		var back string
		if err := json.Unmarshal([]byte(s), &back); err != nil || back != string(rune(c)) {
			t.Errorf("AppendJSONString(%#x) = %s, round trip %q %v", c, s, back, err)
		}
	}
	for _, in := range []string{"", "plain", "é\u2028\"\\/", "a\nb\tc\x00"} {
		s := AppendJSONString([]byte("x:"), in)
		var back string
		if err := json.Unmarshal(s[2:], &back); err != nil || back != in {
			t.Errorf("AppendJSONString(%q) = %s, round trip %q %v", in, s, back, err)
		}
	}
}
