package awsdeploy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	storedynamo "github.com/supervaize/svz/core/store/dynamodb"
	"github.com/supervaize/svz/deploy"
)

// Store table schema: the one core/store/dynamodb checks at start, and the index its List reads.
const (
	TableKey          = storedynamo.AttrKey
	TableTTLAttribute = storedynamo.AttrTTL
	TableIndex        = storedynamo.IndexName
	TableIndexKey     = storedynamo.AttrIndex
)

// TableARN is the ARN of a DynamoDB table.
func TableARN(region, account, name string) string {
	return fmt.Sprintf("arn:aws:dynamodb:%s:%s:table/%s", region, account, name)
}

// TableStatement allows the controller's DynamoDB store what it calls, on one table only:
// DescribeTable at start, then one item operation per store call; the effect log also claims
// positions with UpdateItem and reads and reclaims entries in batches; a listing queries the
// table's key index, then reads the items in batches.
func TableStatement(arn string) Statement {
	return Statement{Sid: "StoreTable", Action: List{"dynamodb:DescribeTable", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:DeleteItem",
		"dynamodb:UpdateItem", "dynamodb:BatchGetItem", "dynamodb:BatchWriteItem", "dynamodb:Query"},
		Resource: List{arn, arn + "/index/" + TableIndex}}
}

// StoreTable converges the DynamoDB table of core/store/dynamodb: on demand, partition key "k" of
// type S, TTL on "ttl" (the store checks expiry itself; TTL only sweeps expired items eventually),
// and the global secondary index its List reads (added to a table made without it).
type StoreTable struct {
	Client *dynamodb.Client
	// Wait bounds the wait for a new table to become active; 0 means 5 minutes.
	Wait time.Duration
}

// tableState is what Plan reads of a table.
type tableState struct {
	exists, ttlOK, indexOK, managed bool
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
	for _, ix := range out.Table.GlobalSecondaryIndexes {
		st.indexOK = st.indexOK || aws.ToString(ix.IndexName) == TableIndex
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
		if aws.ToString(tag.Key) == ManagedByTag && aws.ToString(tag.Value) == ManagedByValue {
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
	c, _, err := t.plan(ctx, name)
	return c, err
}

func (t *StoreTable) plan(ctx context.Context, name string) (deploy.Change, tableState, error) {
	c := deploy.Change{Resource: "dynamodb-table", Name: name, Action: deploy.NoOp}
	st, err := t.read(ctx, name, false)
	switch {
	case err != nil:
		return c, st, err
	case st.badSchema != nil:
		return c, st, st.badSchema
	case !st.exists:
		c.Action = deploy.Create
	default:
		var todo []string
		if !st.ttlOK {
			todo = append(todo, "enable TTL on "+TableTTLAttribute)
		}
		if !st.indexOK {
			todo = append(todo, "add index "+TableIndex)
		}
		if len(todo) > 0 {
			c.Action, c.Detail = deploy.Update, strings.Join(todo, "; ")
		}
	}
	return c, st, nil
}

// keyIndex is the index core/store/dynamodb's List reads: every item's ix, then its key.
func keyIndex() ddbtypes.GlobalSecondaryIndex {
	return ddbtypes.GlobalSecondaryIndex{
		IndexName: aws.String(TableIndex),
		KeySchema: []ddbtypes.KeySchemaElement{{AttributeName: aws.String(TableIndexKey), KeyType: ddbtypes.KeyTypeHash},
			{AttributeName: aws.String(TableKey), KeyType: ddbtypes.KeyTypeRange}},
		Projection: &ddbtypes.Projection{ProjectionType: ddbtypes.ProjectionTypeKeysOnly},
	}
}

// attributes are the table's key attributes, the index's included.
func attributes() []ddbtypes.AttributeDefinition {
	return []ddbtypes.AttributeDefinition{{AttributeName: aws.String(TableKey), AttributeType: ddbtypes.ScalarAttributeTypeS},
		{AttributeName: aws.String(TableIndexKey), AttributeType: ddbtypes.ScalarAttributeTypeS}}
}

// Ensure creates the table when absent (tagged managed-by=svz), adds the key index when it lacks
// it, and enables TTL when it is off.
func (t *StoreTable) Ensure(ctx context.Context, name string) (deploy.Change, error) {
	c, st, err := t.plan(ctx, name)
	if err != nil || c.Action == deploy.NoOp {
		return c, err
	}
	if c.Action == deploy.Create {
		_, err := t.Client.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:              aws.String(name),
			BillingMode:            ddbtypes.BillingModePayPerRequest,
			AttributeDefinitions:   attributes(),
			KeySchema:              []ddbtypes.KeySchemaElement{{AttributeName: aws.String(TableKey), KeyType: ddbtypes.KeyTypeHash}},
			GlobalSecondaryIndexes: []ddbtypes.GlobalSecondaryIndex{keyIndex()},
			Tags:                   []ddbtypes.Tag{{Key: aws.String(ManagedByTag), Value: aws.String(ManagedByValue)}},
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
	if st.exists && !st.indexOK {
		// DynamoDB builds the index in the background; List waits for it, nothing else does.
		ix := keyIndex()
		if _, err := t.Client.UpdateTable(ctx, &dynamodb.UpdateTableInput{
			TableName:            aws.String(name),
			AttributeDefinitions: attributes(),
			GlobalSecondaryIndexUpdates: []ddbtypes.GlobalSecondaryIndexUpdate{{Create: &ddbtypes.CreateGlobalSecondaryIndexAction{
				IndexName: ix.IndexName, KeySchema: ix.KeySchema, Projection: ix.Projection}}},
		}); err != nil {
			return c, fmt.Errorf("dynamodb:UpdateTable %s (add index %s): %w", name, TableIndex, err)
		}
	}
	if st.ttlOK {
		return c, nil
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
			return deploy.KeptChange("dynamodb-table", name), nil
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
