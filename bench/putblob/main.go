// Command putblob uploads a file as a block blob, creating its container:
// the benchmarks' way to put an input in Azurite (bench/fleet.sh --blob).
//
//	go run ./bench/putblob CONNECTION_STRING CONTAINER NAME FILE
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
)

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: putblob CONNECTION_STRING CONTAINER NAME FILE")
		os.Exit(2)
	}
	if err := put(os.Args[1], os.Args[2], os.Args[3], os.Args[4]); err != nil {
		fmt.Fprintln(os.Stderr, "putblob:", err)
		os.Exit(1)
	}
}

func put(conn, name, blobName, path string) error {
	ctx := context.Background()
	cc, err := container.NewClientFromConnectionString(conn, name, nil)
	if err != nil {
		return err
	}
	if _, err := cc.Create(ctx, nil); err != nil {
		fmt.Fprintln(os.Stderr, "putblob: create container:", err, "(using it as it is)")
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = cc.NewBlockBlobClient(blobName).UploadFile(ctx, f, nil)
	return err
}
