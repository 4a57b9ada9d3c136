package cmd

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cosmosloader/loader/internal/blobsource"
	"github.com/cosmosloader/loader/loader/source"
	"github.com/cosmosloader/loader/loader/source/formats"
)

// BlobFlags are the credentials for inputs in Azure Blob Storage. A SAS in
// an input URL wins; then the connection string; then Microsoft Entra ID.
type BlobFlags struct {
	SourceConnectionString string // a secret: never shown or stored
	// SourceSAS is resume's only way to give a SAS: the checkpoint keeps
	// the inputs' URLs without theirs.
	SourceSAS string
}

func (b *BlobFlags) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&b.SourceConnectionString, "source-connection-string", "",
		"Azure Storage connection string for blob inputs (env LOADER_SOURCE_CONNECTION_STRING; default: a SAS in the URL, else Microsoft Entra ID)")
	group(cmd.Flags(), groupInput, "source-connection-string")
}

func (b *BlobFlags) fromEnv(getenv func(string) string) {
	if b.SourceConnectionString == "" {
		b.SourceConnectionString = getenv("LOADER_SOURCE_CONNECTION_STRING")
	}
	if b.SourceSAS == "" {
		b.SourceSAS = getenv("LOADER_SOURCE_SAS")
	}
}

func (b *BlobFlags) resolver(ctx context.Context) *blobsource.Resolver {
	return blobsource.New(ctx, blobsource.Config{ConnectionString: b.SourceConnectionString})
}

// expandInputs resolves local paths and blob URLs, mixed in argument order.
func (b *BlobFlags) expandInputs(ctx context.Context, args []string) ([]source.Input, error) {
	return formats.Expand(args, b.resolver(ctx))
}

// openRemote reopens a blob input of a checkpoint by its URL (stored
// without credentials), with --source-sas appended when given.
func (b *BlobFlags) openRemote(ctx context.Context, r *blobsource.Resolver, url string) (source.Input, error) {
	if b.SourceSAS != "" {
		url += "?" + strings.TrimPrefix(b.SourceSAS, "?")
	}
	return r.Open(url)
}

// redactArgs drops the SAS from URL arguments before anything keeps them.
func redactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = blobsource.Redact(a)
	}
	return out
}
