package cmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/cosmosloader/loader/internal/stores"
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

// remotes are the remote stores (internal/stores) as this command reaches
// them, with its credentials.
func (b *BlobFlags) remotes(ctx context.Context) *source.Remotes {
	return stores.All().Connect(ctx, source.Credentials{ConnectionString: b.SourceConnectionString, ResumeToken: b.SourceSAS})
}

// expandInputs resolves local paths and remote URLs, mixed in argument
// order.
func (b *BlobFlags) expandInputs(ctx context.Context, args []string) ([]source.Input, error) {
	return formats.Expand(args, b.remotes(ctx))
}

// redactArgs drops credentials from URL arguments before anything keeps
// them.
func redactArgs(args []string) []string { return stores.All().Redact(args) }
