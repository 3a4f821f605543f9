package awsdeploy_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/supervaize/svz/deploy"
	"github.com/supervaize/svz/deploy/awsdeploy"
	"github.com/supervaize/svz/deploy/internal/awstest"
)

func createTable(t *testing.T, c *dynamodb.Client, name, key string, typ ddbtypes.ScalarAttributeType) {
	t.Helper()
	if _, err := c.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName: aws.String(name), BillingMode: ddbtypes.BillingModePayPerRequest,
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String(key), AttributeType: typ}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String(key), KeyType: ddbtypes.KeyTypeHash}},
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
}

// TestStoreTable: create with the store's schema and TTL, converge, refuse a table of another key
// schema, and delete only what svz created when asked to.
func TestStoreTable(t *testing.T) {
	cfg := awstest.Config(t)
	ctx := context.Background()
	st := &awsdeploy.StoreTable{Client: dynamodb.NewFromConfig(cfg)}
	name := awstest.Name("store")

	step := func(what string, got deploy.Change, err error, want deploy.Change) {
		t.Helper()
		if err != nil || got != want {
			t.Fatalf("%s: %+v %v, want %+v", what, got, err, want)
		}
	}
	c, err := st.Plan(ctx, name)
	step("plan absent", c, err, deploy.Change{Resource: "dynamodb-table", Name: name, Action: deploy.Create})
	c, err = st.Ensure(ctx, name)
	step("ensure absent", c, err, deploy.Change{Resource: "dynamodb-table", Name: name, Action: deploy.Create})
	c, err = st.Ensure(ctx, name)
	step("ensure again", c, err, deploy.Change{Resource: "dynamodb-table", Name: name, Action: deploy.NoOp})
	ttl, err := st.Client.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	if err != nil || aws.ToString(ttl.TimeToLiveDescription.AttributeName) != "ttl" || ttl.TimeToLiveDescription.TimeToLiveStatus != ddbtypes.TimeToLiveStatusEnabled {
		t.Fatalf("TTL %+v %v", ttl, err)
	}

	// A user's table with the right key but TTL off: updated, and never deleted with onlyManaged.
	user := awstest.Name("user")
	createTable(t, st.Client, user, "k", ddbtypes.ScalarAttributeTypeS)
	c, err = st.Plan(ctx, user)
	step("plan user table", c, err, deploy.Change{Resource: "dynamodb-table", Name: user, Action: deploy.Update, Detail: "enable TTL on ttl; add index svz-keys"})
	c, err = st.Ensure(ctx, user)
	step("ensure user table", c, err, deploy.Change{Resource: "dynamodb-table", Name: user, Action: deploy.Update, Detail: "enable TTL on ttl; add index svz-keys"})
	c, err = st.Ensure(ctx, user)
	step("ensure user table again", c, err, deploy.Change{Resource: "dynamodb-table", Name: user, Action: deploy.NoOp})
	c, err = st.Delete(ctx, user, true)
	step("delete user table", c, err, deploy.Change{Resource: "dynamodb-table", Name: user, Action: deploy.NoOp, Detail: "kept: svz deploy did not create it"})
	if _, err := st.Client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(user)}); err != nil {
		t.Fatalf("the user's table is gone: %v", err)
	}

	// Tables the store would refuse at start are refused here, before anything is deployed.
	for _, tc := range []struct {
		key  string
		typ  ddbtypes.ScalarAttributeType
		want string
	}{
		{"pk", ddbtypes.ScalarAttributeTypeS, `its key schema must be exactly partition key "k" (S); use another SUPERVAIZER_STORE_TABLE`},
		{"k", ddbtypes.ScalarAttributeTypeN, `partition key "k" is of type N, want S; use another SUPERVAIZER_STORE_TABLE`},
	} {
		bad := awstest.Name("bad")
		createTable(t, st.Client, bad, tc.key, tc.typ)
		want := "dynamodb table " + bad + " exists but cannot hold the controller's store: " + tc.want
		if _, err := st.Plan(ctx, bad); err == nil || err.Error() != want {
			t.Errorf("plan %s: %v\nwant %s", tc.key, err, want)
		}
		if _, err := st.Ensure(ctx, bad); err == nil || err.Error() != want {
			t.Errorf("ensure %s: %v\nwant %s", tc.key, err, want)
		}
	}

	c, err = st.Delete(ctx, name, true)
	step("delete managed", c, err, deploy.Change{Resource: "dynamodb-table", Name: name, Action: deploy.Delete})
	var nf *ddbtypes.ResourceNotFoundException
	if _, err := st.Client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}); !errors.As(err, &nf) {
		t.Fatalf("table after delete: %v", err)
	}
	c, err = st.Delete(ctx, name, true)
	step("delete absent", c, err, deploy.Change{Resource: "dynamodb-table", Name: name, Action: deploy.NoOp, Detail: "absent"})
	c, err = st.Delete(ctx, name, false)
	step("delete absent, unguarded", c, err, deploy.Change{Resource: "dynamodb-table", Name: name, Action: deploy.NoOp, Detail: "absent"})
}

func TestTableStatement(t *testing.T) {
	got := awsdeploy.NewPolicy(awsdeploy.TableStatement(awsdeploy.TableARN("eu-west-3", "123456789012", "svc-dev"))).JSON()
	want := `{"Version":"2012-10-17","Statement":[{"Sid":"StoreTable","Effect":"Allow","Action":["dynamodb:DescribeTable","dynamodb:GetItem","dynamodb:PutItem","dynamodb:DeleteItem","dynamodb:UpdateItem","dynamodb:BatchGetItem","dynamodb:BatchWriteItem","dynamodb:Query"],"Resource":["arn:aws:dynamodb:eu-west-3:123456789012:table/svc-dev","arn:aws:dynamodb:eu-west-3:123456789012:table/svc-dev/index/svz-keys"]}]}`
	if got != want {
		t.Fatalf("policy\n got %s\nwant %s", got, want)
	}
}
