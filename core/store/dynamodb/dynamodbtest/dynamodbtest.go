// Package dynamodbtest gives a test a store table of its own on the moto_server of the test
// environment (testenv.AWSEndpoint, started by scripts/with-services), deleted when the test ends.
package dynamodbtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/supervaize/svz/core/store/dynamodb"
	"github.com/supervaize/svz/internal/awsapi"
	"github.com/supervaize/svz/internal/testenv"
)

// Table creates a store table named prefix and random hex on the moto_server at endpoint, deleted
// with the test, and returns a client to it (with opts, e.g. the HTTP client testenv.MotoWrites)
// and the table's name.
func Table(t testing.TB, endpoint, prefix string, opts ...awsapi.Option) (*awsapi.Client, string) {
	t.Helper()
	env := map[string]string{"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
	c, err := dynamodb.NewClient(func(k string) string { return env[k] }, opts...)
	if err != nil {
		t.Fatal(err)
	}
	name := testenv.UniqueName(prefix)
	if err := dynamodb.CreateTable(context.Background(), c, name); err != nil {
		// On a loaded machine the client may send CreateTable again after an answer it did not
		// get in time: the table, its name ours alone, was created by the first request.
		if !strings.Contains(err.Error(), "ResourceInUseException") {
			t.Fatal(err)
		}
		if err := waitUsable(c, name); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = c.Call(context.Background(), "DeleteTable", map[string]string{"TableName": name}, nil) })
	return c, name
}

// Open opens a store on the table, closed with the test.
func Open(t testing.TB, c *awsapi.Client, table string, opts ...dynamodb.Option) *dynamodb.Store {
	t.Helper()
	s, err := dynamodb.New(context.Background(), c, table, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Env is the environment that configures a process's store on the table at endpoint, as
// template.yaml configures a function.
func Env(endpoint, table string) []string {
	return []string{"SUPERVAIZER_STORE=dynamodb", "SUPERVAIZER_STORE_TABLE=" + table,
		"AWS_ENDPOINT_URL=" + endpoint, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test"}
}

// waitUsable waits until the store opens on table (created, with its index), for a minute at most.
func waitUsable(c *awsapi.Client, table string) error {
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var s *dynamodb.Store
		if s, err = dynamodb.New(context.Background(), c, table); err == nil {
			return s.Close()
		}
	}
	return err
}
