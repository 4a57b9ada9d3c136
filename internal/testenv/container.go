package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/azcosmos"
)

// CreateContainer creates the container props in database db (created
// when missing) with manual throughput ru, and returns its client: how the
// end-to-end tests and the bench runner shape a container on a target
// before a load.
func CreateContainer(ctx context.Context, c *azcosmos.Client, db string, props azcosmos.ContainerProperties, ru int32) (*azcosmos.ContainerClient, error) {
	if _, err := c.CreateDatabase(ctx, azcosmos.DatabaseProperties{ID: db}, nil); err != nil && !IsConflict(err) {
		return nil, fmt.Errorf("create database %s: %w", db, err)
	}
	d, err := c.NewDatabase(db)
	if err != nil {
		return nil, err
	}
	tp := azcosmos.NewManualThroughputProperties(ru)
	if _, err := d.CreateContainer(ctx, props, &azcosmos.CreateContainerOptions{ThroughputProperties: &tp}); err != nil {
		return nil, fmt.Errorf("create container %s: %w", props.ID, err)
	}
	return d.NewContainer(props.ID)
}

// TenantKey is the partition key the tests' and the bench's generated
// records are spread by.
var TenantKey = azcosmos.PartitionKeyDefinition{Paths: []string{"/tenant"}, Version: 2}

// IsConflict reports whether err is Cosmos DB's 409: the resource exists.
func IsConflict(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusConflict
}
