package bench

import (
	"os"
	"testing"

	"github.com/cosmosloader/loader/internal/testenv"
)

// TestMain removes the loader binary the benchmarks built.
func TestMain(m *testing.M) { os.Exit(testenv.RunMain(m)) }
