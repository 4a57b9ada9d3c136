// Command loader streams NDJSON, JSON, CSV/TSV and Parquet files into Azure
// Cosmos DB, paced to the container's provisioned throughput. See README.md.
package main

import (
	"os"

	"github.com/cosmosloader/loader/cmd"
)

func main() { os.Exit(cmd.Main()) }
