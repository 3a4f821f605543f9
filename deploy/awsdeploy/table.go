package awsdeploy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	storedynamo "github.com/supervaize/svz/core/store/dynamodb"
	"github.com/supervaize/svz/deploy"
)

// Store table schema: the one core/store/dynamodb checks at start.
const (
	TableKey          = storedynamo.AttrKey
	TableTTLAttribute = storedynamo.AttrTTL
)

// TableARN is the ARN of a DynamoDB table.
func TableARN(region, account, name string) string {
	return fmt.Sprintf("arn:aws:dynamodb:%s:%s:table/%s", region, account, name)
}

// TableStatement allows the controller's DynamoDB store what it calls, on one table only:
// DescribeTable at start, then one item operation per store call; the effect log also claims
// positions with UpdateItem and reads and reclaims entries in batches.
func TableStatement(arn string) Statement {
	return Statement{Sid: "StoreTable", Action: List{"dynamodb:DescribeTable", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem",
		"dynamodb:UpdateItem", "dynamodb:BatchGetItem", "dynamodb:BatchWriteItem"},
		Resource: List{arn}}
}

// StoreTable converges the DynamoDB table of core/store/dynamodb: on demand, partition key "k" of
// type S, TTL on "ttl" (the store checks expiry itself; TTL only sweeps expired items eventually).
type StoreTable struct {
	Client *dynamodb.Client
	// Wait bounds the wait for a new table to become active; 0 means 5 minutes.
	Wait time.Duration
}

// tableState is what Plan reads of a table.
type tableState struct {
	exists, ttlOK, managed bool
	// badSchema says why the table cannot hold the store (nil when it can).
	badSchema error
}

// read describes the table; only withTags reads its tags (for Delete: plan and deploy need no
// dynamodb:ListTagsOfResource).
func (t *StoreTable) read(ctx context.Context, name string, withTags bool) (tableState, error) {
	out, err := t.Client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
	var nf *ddbtypes.ResourceNotFoundException
	switch {
	case errors.As(err, &nf):
		return tableState{}, nil
	case err != nil:
		return tableState{}, fmt.Errorf("dynamodb:DescribeTable %s: %w", name, err)
	}
	st := tableState{exists: true}
	if err := checkKeySchema(out.Table); err != nil {
		st.badSchema = fmt.Errorf("dynamodb table %s exists but cannot hold the controller's store: %w", name, err)
	}
	ttl, err := t.Client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	if err != nil {
		return st, fmt.Errorf("dynamodb:DescribeTimeToLive %s: %w", name, err)
	}
	d := ttl.TimeToLiveDescription
	st.ttlOK = d != nil && aws.ToString(d.AttributeName) == TableTTLAttribute &&
		(d.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabled || d.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabling)
	if !withTags {
		return st, nil
	}
	tags, err := t.Client.ListTagsOfResource(ctx, &dynamodb.ListTagsOfResourceInput{ResourceArn: out.Table.TableArn})
	if err != nil {
		return st, fmt.Errorf("dynamodb:ListTagsOfResource %s: %w", name, err)
	}
	for _, tag := range tags.Tags {
		if aws.ToString(tag.Key) == ManagedByTag && aws.ToString(tag.Value) == "svz" {
			st.managed = true
		}
	}
	return st, nil
}

// checkKeySchema accepts exactly the store's key: partition key "k" of type S, no sort key.
func checkKeySchema(t *ddbtypes.TableDescription) error {
	if t == nil {
		return errors.New("DescribeTable answered without a table")
	}
	ks := t.KeySchema
	if len(ks) != 1 || aws.ToString(ks[0].AttributeName) != TableKey || ks[0].KeyType != ddbtypes.KeyTypeHash {
		return fmt.Errorf("its key schema must be exactly partition key %q (S); use another SUPERVAIZER_STORE_TABLE", TableKey)
	}
	for _, a := range t.AttributeDefinitions {
		if aws.ToString(a.AttributeName) == TableKey && a.AttributeType != ddbtypes.ScalarAttributeTypeS {
			return fmt.Errorf("partition key %q is of type %s, want S; use another SUPERVAIZER_STORE_TABLE", TableKey, a.AttributeType)
		}
	}
	return nil
}

// Plan says what Ensure would do. An existing table with another key schema is an error: the
// controller would refuse it at start.
func (t *StoreTable) Plan(ctx context.Context, name string) (deploy.Change, error) {
	c := deploy.Change{Resource: "dynamodb-table", Name: name, Action: deploy.NoOp}
	st, err := t.read(ctx, name, false)
	switch {
	case err != nil:
		return c, err
	case st.badSchema != nil:
		return c, st.badSchema
	case !st.exists:
		c.Action = deploy.Create
	case !st.ttlOK:
		c.Action, c.Detail = deploy.Update, "enable TTL on "+TableTTLAttribute
	}
	return c, nil
}

// Ensure creates the table when absent (tagged managed-by=svz) and enables TTL when it is off.
func (t *StoreTable) Ensure(ctx context.Context, name string) (deploy.Change, error) {
	c, err := t.Plan(ctx, name)
	if err != nil || c.Action == deploy.NoOp {
		return c, err
	}
	if c.Action == deploy.Create {
		_, err := t.Client.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            aws.String(name),
			BillingMode:          ddbtypes.BillingModePayPerRequest,
			AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String(TableKey), AttributeType: ddbtypes.ScalarAttributeTypeS}},
			KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String(TableKey), KeyType: ddbtypes.KeyTypeHash}},
			Tags:                 []ddbtypes.Tag{{Key: aws.String(ManagedByTag), Value: aws.String("svz")}},
		})
		if err != nil {
			return c, fmt.Errorf("dynamodb:CreateTable %s: %w", name, err)
		}
		wait := t.Wait
		if wait <= 0 {
			wait = 5 * time.Minute
		}
		if err := dynamodb.NewTableExistsWaiter(t.Client).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, wait); err != nil {
			return c, fmt.Errorf("wait for table %s: %w", name, err)
		}
	}
	if _, err := t.Client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(name),
		TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(TableTTLAttribute), Enabled: aws.Bool(true)},
	}); err != nil {
		return c, fmt.Errorf("dynamodb:UpdateTimeToLive %s: %w", name, err)
	}
	return c, nil
}

// Delete removes the table and its data. With onlyManaged, a table svz did not create (no
// managed-by=svz tag) is kept and reported as such.
func (t *StoreTable) Delete(ctx context.Context, name string, onlyManaged bool) (deploy.Change, error) {
	c := deploy.Change{Resource: "dynamodb-table", Name: name, Action: deploy.Delete}
	if onlyManaged {
		st, err := t.read(ctx, name, true)
		switch {
		case err != nil:
			return c, err
		case !st.exists:
			c.Action, c.Detail = deploy.NoOp, "absent"
			return c, nil
		case !st.managed:
			c.Action, c.Detail = deploy.NoOp, "kept: not created by svz"
			return c, nil
		}
	}
	_, err := t.Client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	var nf *ddbtypes.ResourceNotFoundException
	switch {
	case errors.As(err, &nf):
		c.Action, c.Detail = deploy.NoOp, "absent"
	case err != nil:
		return c, fmt.Errorf("dynamodb:DeleteTable %s: %w", name, err)
	}
	return c, nil
}
