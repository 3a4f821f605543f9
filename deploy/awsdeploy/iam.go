package awsdeploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	"github.com/supervaize/svz/deploy"
)

// Policy is an IAM policy document.
type Policy struct {
	Version   string      `json:"Version"`
	Statement []Statement `json:"Statement"`
}

// Statement is one statement of a Policy. IAM accepts a string where a list is expected; List
// reads both.
type Statement struct {
	Sid       string          `json:"Sid,omitempty"`
	Effect    string          `json:"Effect"`
	Principal *Principal      `json:"Principal,omitempty"`
	Action    List            `json:"Action"`
	Resource  List            `json:"Resource,omitempty"`
	Condition json.RawMessage `json:"Condition,omitempty"`
}

// Principal names the services trusted by a role.
type Principal struct {
	Service List `json:"Service"`
}

// List is a string list that also unmarshals from a single string.
type List []string

// UnmarshalJSON accepts "a" and ["a","b"].
func (l *List) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*l = nil
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*l = List{s}
		return nil
	}
	var ss []string
	if err := json.Unmarshal(b, &ss); err != nil {
		return fmt.Errorf("policy: want a string or a list of strings: %w", err)
	}
	*l = ss
	return nil
}

// NewPolicy builds a policy of allow statements.
func NewPolicy(st ...Statement) Policy {
	for i := range st {
		if st[i].Effect == "" {
			st[i].Effect = "Allow"
		}
	}
	return Policy{Version: "2012-10-17", Statement: st}
}

// TrustPolicy lets the given service assume a role.
func TrustPolicy(service string) Policy {
	return NewPolicy(Statement{Principal: &Principal{Service: List{service}}, Action: List{"sts:AssumeRole"}})
}

// JSON renders the policy.
func (p Policy) JSON() string {
	b, _ := json.Marshal(p) // a Policy always marshals
	return string(b)
}

// ParsePolicy reads a policy as IAM returns it: URL-encoded JSON (or plain JSON).
func ParsePolicy(doc string) (Policy, error) {
	if dec, err := url.QueryUnescape(doc); err == nil && strings.HasPrefix(strings.TrimSpace(dec), "{") {
		doc = dec
	}
	var p Policy
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		return Policy{}, fmt.Errorf("parse IAM policy: %w", err)
	}
	return p, nil
}

// SamePolicy compares two policies statement by statement, ignoring the order inside lists.
func SamePolicy(a, b Policy) bool {
	norm := func(p Policy) Policy {
		out := Policy{Version: p.Version}
		for _, s := range p.Statement {
			s.Action = sorted(s.Action)
			s.Resource = sorted(s.Resource)
			if s.Principal != nil {
				s.Principal = &Principal{Service: sorted(s.Principal.Service)}
			}
			if len(s.Condition) > 0 {
				var v any
				if json.Unmarshal(s.Condition, &v) == nil {
					s.Condition, _ = json.Marshal(v)
				}
			}
			out.Statement = append(out.Statement, s)
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

func sorted(l List) List {
	if len(l) == 0 {
		return nil
	}
	c := append(List(nil), l...)
	sort.Strings(c)
	return c
}

// InlinePolicyName is the name of the inline policy svz keeps on its roles.
const InlinePolicyName = "svz"

// Role is an IAM role svz owns: a trust policy, an optional inline policy and managed policies.
// Roles changes and deletes only the roles it created (tag managed-by=svz).
type Role struct {
	Name    string
	Trust   Policy
	Inline  *Policy
	Managed []string // managed policy ARNs
}

// Roles converges IAM roles.
type Roles struct {
	Client *iam.Client
}

type liveRole struct {
	ours    bool // tagged managed-by=svz
	arn     string
	trust   Policy
	inline  *Policy
	managed []string
}

func (r *Roles) read(ctx context.Context, name string) (*liveRole, error) {
	out, err := r.Client.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
	var nf *iamtypes.NoSuchEntityException
	switch {
	case errors.As(err, &nf):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("iam:GetRole %s: %w", name, err)
	}
	lr := &liveRole{arn: aws.ToString(out.Role.Arn)}
	for _, t := range out.Role.Tags {
		if aws.ToString(t.Key) == ManagedByTag && aws.ToString(t.Value) == ManagedByValue {
			lr.ours = true
		}
	}
	if !lr.ours { // someone else's role: read nothing more, change nothing
		return lr, nil
	}
	if lr.trust, err = ParsePolicy(aws.ToString(out.Role.AssumeRolePolicyDocument)); err != nil {
		return nil, fmt.Errorf("role %s trust policy: %w", name, err)
	}
	pol, err := r.Client.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(name), PolicyName: aws.String(InlinePolicyName)})
	switch {
	case errors.As(err, &nf):
	case err != nil:
		return nil, fmt.Errorf("iam:GetRolePolicy %s: %w", name, err)
	default:
		p, err := ParsePolicy(aws.ToString(pol.PolicyDocument))
		if err != nil {
			return nil, fmt.Errorf("role %s policy: %w", name, err)
		}
		lr.inline = &p
	}
	att, err := r.Client.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("iam:ListAttachedRolePolicies %s: %w", name, err)
	}
	for _, a := range att.AttachedPolicies {
		lr.managed = append(lr.managed, aws.ToString(a.PolicyArn))
	}
	return lr, nil
}

// notManaged is the refusal to touch a role svz did not create.
func notManaged(name string) error {
	return &deploy.NotManagedError{Kind: "iam role", Name: name,
		Adopt: "aws iam tag-role --role-name " + name + " --tags Key=" + ManagedByTag + ",Value=" + ManagedByValue}
}

// diff says what differs between a live role and the desired one ("" when equal).
func (lr *liveRole) diff(want Role) string {
	var d []string
	if !SamePolicy(lr.trust, want.Trust) {
		d = append(d, "trust policy")
	}
	switch {
	case want.Inline == nil && lr.inline != nil, want.Inline != nil && lr.inline == nil:
		d = append(d, "inline policy")
	case want.Inline != nil && !SamePolicy(*lr.inline, *want.Inline):
		d = append(d, "inline policy")
	}
	if !reflect.DeepEqual(sorted(lr.managed), sorted(want.Managed)) {
		d = append(d, "managed policies")
	}
	return strings.Join(d, ", ")
}

// Plan says what Ensure would do.
func (r *Roles) Plan(ctx context.Context, want Role) (deploy.Change, error) {
	c := deploy.Change{Resource: "iam-role", Name: want.Name}
	lr, err := r.read(ctx, want.Name)
	switch {
	case err != nil:
		return c, err
	case lr == nil:
		c.Action = deploy.Create
	case !lr.ours:
		return c, notManaged(want.Name)
	default:
		c.Action, c.Detail = deploy.NoOp, lr.diff(want)
		if c.Detail != "" {
			c.Action = deploy.Update
		}
	}
	return c, nil
}

// Ensure creates or updates the role and returns its ARN.
func (r *Roles) Ensure(ctx context.Context, want Role) (string, deploy.Change, error) {
	c := deploy.Change{Resource: "iam-role", Name: want.Name, Action: deploy.NoOp}
	lr, err := r.read(ctx, want.Name)
	if err != nil {
		return "", c, err
	}
	if lr == nil {
		out, err := r.Client.CreateRole(ctx, &iam.CreateRoleInput{
			RoleName:                 aws.String(want.Name),
			AssumeRolePolicyDocument: aws.String(want.Trust.JSON()),
			Description:              aws.String("Supervaizer controller, managed by svz deploy"),
			Tags:                     []iamtypes.Tag{{Key: aws.String(ManagedByTag), Value: aws.String(ManagedByValue)}},
		})
		if err != nil {
			return "", c, fmt.Errorf("iam:CreateRole %s: %w", want.Name, err)
		}
		c.Action = deploy.Create
		lr = &liveRole{ours: true, arn: aws.ToString(out.Role.Arn), trust: want.Trust}
	} else if !lr.ours {
		return "", c, notManaged(want.Name)
	} else if c.Detail = lr.diff(want); c.Detail != "" {
		c.Action = deploy.Update
	}
	if !SamePolicy(lr.trust, want.Trust) {
		if _, err := r.Client.UpdateAssumeRolePolicy(ctx, &iam.UpdateAssumeRolePolicyInput{
			RoleName: aws.String(want.Name), PolicyDocument: aws.String(want.Trust.JSON()),
		}); err != nil {
			return "", c, fmt.Errorf("iam:UpdateAssumeRolePolicy %s: %w", want.Name, err)
		}
	}
	switch {
	case want.Inline != nil && (lr.inline == nil || !SamePolicy(*lr.inline, *want.Inline)):
		if _, err := r.Client.PutRolePolicy(ctx, &iam.PutRolePolicyInput{
			RoleName: aws.String(want.Name), PolicyName: aws.String(InlinePolicyName), PolicyDocument: aws.String(want.Inline.JSON()),
		}); err != nil {
			return "", c, fmt.Errorf("iam:PutRolePolicy %s: %w", want.Name, err)
		}
	case want.Inline == nil && lr.inline != nil:
		if _, err := r.Client.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{
			RoleName: aws.String(want.Name), PolicyName: aws.String(InlinePolicyName),
		}); err != nil {
			return "", c, fmt.Errorf("iam:DeleteRolePolicy %s: %w", want.Name, err)
		}
	}
	have := map[string]bool{}
	for _, a := range lr.managed {
		have[a] = true
	}
	for _, a := range want.Managed {
		if have[a] {
			delete(have, a)
			continue
		}
		if _, err := r.Client.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String(want.Name), PolicyArn: aws.String(a)}); err != nil {
			return "", c, fmt.Errorf("iam:AttachRolePolicy %s %s: %w", want.Name, a, err)
		}
	}
	for a := range have {
		if _, err := r.Client.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: aws.String(want.Name), PolicyArn: aws.String(a)}); err != nil {
			return "", c, fmt.Errorf("iam:DetachRolePolicy %s %s: %w", want.Name, a, err)
		}
	}
	return lr.arn, c, nil
}

// Delete removes a role svz created with its inline and attached policies; another role of that
// name is kept (deploy.KeptChange).
func (r *Roles) Delete(ctx context.Context, name string) (deploy.Change, error) {
	c := deploy.Change{Resource: "iam-role", Name: name, Action: deploy.Delete}
	lr, err := r.read(ctx, name)
	if err != nil {
		return c, err
	}
	if lr == nil {
		c.Action, c.Detail = deploy.NoOp, "absent"
		return c, nil
	}
	if !lr.ours {
		return deploy.KeptChange("iam-role", name), nil
	}
	if lr.inline != nil {
		if _, err := r.Client.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: aws.String(name), PolicyName: aws.String(InlinePolicyName)}); err != nil {
			return c, fmt.Errorf("iam:DeleteRolePolicy %s: %w", name, err)
		}
	}
	for _, a := range lr.managed {
		if _, err := r.Client.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: aws.String(name), PolicyArn: aws.String(a)}); err != nil {
			return c, fmt.Errorf("iam:DetachRolePolicy %s %s: %w", name, a, err)
		}
	}
	if _, err := r.Client.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String(name)}); err != nil {
		return c, fmt.Errorf("iam:DeleteRole %s: %w", name, err)
	}
	return c, nil
}

// SecretARNs lists the ARNs of a service's secrets, sorted.
func SecretARNs(s deploy.Service) []string {
	var arns []string
	for _, ref := range s.Secrets {
		arns = append(arns, ref.ID)
	}
	sort.Strings(arns)
	return arns
}
