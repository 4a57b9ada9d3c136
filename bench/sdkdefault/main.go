// Command sdkdefault is "what people write": the azcosmos SDK with its
// default client options (azcore's retry policy: 3 retries honouring
// retry-after) and a fixed pool of goroutines upserting every line of an
// NDJSON file. It is the baseline bench/run compares the loader against, so
// it deliberately does nothing clever: no pacing, no resend after the SDK
// gives up. A document whose upsert still fails is counted as failed.
//
// It prints one JSON object on stdout: records, written, failed, seconds and
// the first few errors.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

type result struct {
	Records int64    `json:"records"`
	Written int64    `json:"written"`
	Failed  int64    `json:"failed"`
	Seconds float64  `json:"seconds"`
	Errors  []string `json:"first_errors,omitempty"`
}

func main() {
	endpoint := flag.String("endpoint", "", "account endpoint")
	key := flag.String("key", "", "account key")
	database := flag.String("database", "bench", "database")
	container := flag.String("container", "", "container (created if missing)")
	pkField := flag.String("partition-key", "/tenant", "partition key path (one top-level string field)")
	ru := flag.Int("ru", 5000, "manual RU/s of the container it creates")
	workers := flag.Int("workers", 32, "concurrent upserts")
	flag.Parse()
	if flag.NArg() != 1 || *endpoint == "" || *container == "" {
		fmt.Fprintln(os.Stderr, "usage: sdkdefault --endpoint URL --key K --container C FILE.ndjson")
		os.Exit(2)
	}
	res, err := run(context.Background(), flag.Arg(0), *endpoint, *key, *database, *container, *pkField, int32(*ru), *workers)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sdkdefault:", err)
		os.Exit(1)
	}
	json.NewEncoder(os.Stdout).Encode(res)
}

func run(ctx context.Context, path, endpoint, key, database, container, pkPath string, ru int32, workers int) (*result, error) {
	cred, err := azcosmos.NewKeyCredential(key)
	if err != nil {
		return nil, fmt.Errorf("parse key: %w", err)
	}
	// nil options: the SDK's defaults, as a first program would have them.
	client, err := azcosmos.NewClientWithKey(endpoint, cred, nil)
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	c, err := ensureContainer(ctx, client, database, container, pkPath, ru)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open input: %w", err)
	}
	defer f.Close()

	field := strings.TrimPrefix(pkPath, "/")
	res := &result{}
	var written, failed atomic.Int64
	var mu sync.Mutex
	lines := make(chan []byte, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for line := range lines {
				err := upsert(ctx, c, field, line)
				if err == nil {
					written.Add(1)
					continue
				}
				failed.Add(1)
				mu.Lock()
				if len(res.Errors) < 5 {
					res.Errors = append(res.Errors, err.Error())
				}
				mu.Unlock()
			}
		}()
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		res.Records++
		lines <- append([]byte(nil), sc.Bytes()...)
	}
	close(lines)
	wg.Wait()
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read input: %w", err)
	}
	res.Seconds = time.Since(start).Seconds()
	res.Written, res.Failed = written.Load(), failed.Load()
	return res, nil
}

func upsert(ctx context.Context, c *azcosmos.ContainerClient, field string, line []byte) error {
	var doc map[string]any
	if err := json.Unmarshal(line, &doc); err != nil {
		return fmt.Errorf("parse line: %w", err)
	}
	pk, _ := doc[field].(string)
	_, err := c.UpsertItem(ctx, azcosmos.NewPartitionKeyString(pk), line, nil)
	return err
}

func ensureContainer(ctx context.Context, client *azcosmos.Client, database, container, pkPath string, ru int32) (*azcosmos.ContainerClient, error) {
	if _, err := client.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: database}, nil); err != nil && !isConflict(err) {
		return nil, fmt.Errorf("create database: %w", err)
	}
	db, err := client.NewDatabase(database)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	tp := azcosmos.NewManualThroughputProperties(ru)
	props := azcosmos.ContainerProperties{
		ID:                     container,
		PartitionKeyDefinition: azcosmos.PartitionKeyDefinition{Paths: []string{pkPath}},
	}
	if _, err := db.CreateContainer(ctx, props, &azcosmos.CreateContainerOptions{ThroughputProperties: &tp}); err != nil && !isConflict(err) {
		return nil, fmt.Errorf("create container: %w", err)
	}
	c, err := db.NewContainer(container)
	if err != nil {
		return nil, fmt.Errorf("open container: %w", err)
	}
	return c, nil
}

func isConflict(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusConflict
}
