package loader

import (
	"errors"
	"strings"
	"testing"
)

// A container is created only with throughput the service accepts; below
// its minimum, or off its steps, the user hears the rule (exit 2).
func TestCheckCreateRU(t *testing.T) {
	for _, tt := range []struct {
		ru   float64
		want string
	}{
		{400, ""}, {4000, ""}, {100000, ""},
		{300, "give --ru 400"}, {0.5, "give --ru 400"}, {450, "give --ru 500"},
	} {
		err := CheckCreateRU(tt.ru)
		var ue *UsageError
		if (err == nil) != (tt.want == "") || err != nil && (!errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "400 RU/s")) {
			t.Errorf("CheckCreateRU(%v) = %v, want %q", tt.ru, err, tt.want)
		}
	}
}
