// Package stores lists the remote stores the commands read inputs from.
// Each is a package implementing source.Store; adding one is adding it
// here, and the commands find it by its URLs.
package stores

import (
	"github.com/cosmosloader/loader/internal/blobsource"
	"github.com/cosmosloader/loader/loader/source"
)

// All are the stores, asked in order which one an argument names.
func All() source.Stores {
	return source.Stores{blobsource.Store{}}
}
