package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/llmedge/llmedge/auth"
	"github.com/llmedge/llmedge/batch"
	"github.com/llmedge/llmedge/doors/openai"
	"github.com/llmedge/llmedge/gateway"
	"github.com/llmedge/llmedge/revocation"
)

// revocations is the auth.Service's view of a revocation list, without
// the sharing between instances (tenancy's part).
type revocations struct{ revocation.List }

func (r *revocations) RevokeToken(_ context.Context, jti string, exp time.Time) (time.Time, error) {
	r.Add(revocation.Entry{JTI: jti, Expires: exp})
	return exp, nil
}

func (r *revocations) RevokeUser(_ context.Context, user, _ string) (time.Time, error) {
	cut := revocation.Cutoff(time.Now())
	r.Add(revocation.Entry{User: user, Before: cut})
	return cut, nil
}

// credentials is a real auth.Service with the users alice and bob (and
// carol, of an outside source), its API keys in a file storage.
func credentials(t *testing.T, rv *revocations) *auth.Service {
	t.Helper()
	hash, err := auth.HashPasswordCost("secret", 4)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := auth.NewService(context.Background(), auth.ServiceConfig{
		Issuer: "llmedge", Audience: "llmedge", TokenTTL: time.Hour, SigningAlg: "HS256", HMACSecret: []byte(strings.Repeat("k", 32)),
		Users:   []auth.User{{Name: "alice", PasswordHash: hash}, {Name: "bob", PasswordHash: hash}},
		Models:  []string{"qwen"},
		Storage: &certmagic.FileStorage{Path: t.TempDir()}, RefreshTokenTTL: -1, Revocations: rv,
	})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// TestBatchLineOfRevokedOwner: a batch's line runs only while the
// credential that created the batch stands. A revoked or expired API
// key, a user disabled, removed or revoked (`llmedge revoke`) after the
// batch was created, an outside identity whose source is no longer
// trusted: the line is answered 401 or 403 in OpenAI's shape, naming the
// cause, and never reaches the replica.
func TestBatchLineOfRevokedOwner(t *testing.T) {
	ctx := context.Background()
	scopes := []string{"model:qwen"}
	cases := []struct {
		name string
		// owner makes the batch's owner and the batch's creation time,
		// then falls (revoke): nil for an owner that stands.
		owner  func(t *testing.T, svc *auth.Service, rv *revocations) (batch.Owner, time.Time, func())
		status int
		code   string
	}{
		{"API key", func(t *testing.T, svc *auth.Service, _ *revocations) (batch.Owner, time.Time, func()) {
			_, info, err := svc.APIKeys().Create(ctx, auth.NewAPIKey{User: "alice"})
			if err != nil {
				t.Fatal(err)
			}
			return batch.Owner{Subject: "alice", KeyID: info.ID, Scopes: scopes}, time.Now(), func() {
				if _, err := svc.APIKeys().Revoke(ctx, info.ID); err != nil {
					t.Fatal(err)
				}
			}
		}, 401, gateway.CodeInvalidAPIKey},
		{"API key of a disabled user", func(t *testing.T, svc *auth.Service, _ *revocations) (batch.Owner, time.Time, func()) {
			_, info, err := svc.APIKeys().Create(ctx, auth.NewAPIKey{User: "alice"})
			if err != nil {
				t.Fatal(err)
			}
			return batch.Owner{Subject: "alice", KeyID: info.ID, Scopes: scopes}, time.Now(), func() {
				users := svc.Users().All()
				for i := range users {
					users[i].Disabled = users[i].Name == "alice"
				}
				if err := svc.Users().Replace(users); err != nil {
					t.Fatal(err)
				}
			}
		}, 403, gateway.CodeOwnerRevoked},
		{"token of a user revoked after the batch", func(t *testing.T, svc *auth.Service, rv *revocations) (batch.Owner, time.Time, func()) {
			return batch.Owner{Subject: "bob", Scopes: scopes}, time.Now().Add(-2 * time.Second), func() {
				_, _ = rv.RevokeUser(ctx, "bob", "user")
			}
		}, 403, gateway.CodeOwnerRevoked},
		{"token of a user removed", func(t *testing.T, svc *auth.Service, _ *revocations) (batch.Owner, time.Time, func()) {
			return batch.Owner{Subject: "bob", Scopes: scopes}, time.Now(), func() {
				var keep []auth.User
				for _, u := range svc.Users().All() {
					if u.Name != "bob" {
						keep = append(keep, u)
					}
				}
				if err := svc.Users().Replace(keep); err != nil {
					t.Fatal(err)
				}
			}
		}, 403, gateway.CodeOwnerRevoked},
		{"outside identity whose source is gone", func(t *testing.T, svc *auth.Service, _ *revocations) (batch.Owner, time.Time, func()) {
			if err := svc.Users().Reserve([]auth.Namespace{{Source: "https://idp.example", Prefix: "idp#"}}); err != nil {
				t.Fatal(err)
			}
			return batch.Owner{Subject: "idp#carol", Provider: "https://idp.example", Scopes: scopes}, time.Now(), func() {
				if err := svc.Users().Reserve([]auth.Namespace{{Source: "https://other.example", Prefix: "other#"}}); err != nil {
					t.Fatal(err)
				}
			}
		}, 403, gateway.CodeOwnerRevoked},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rv := &revocations{}
			svc := credentials(t, rv)
			s := newBatchSite(t, siteOpts{slots: 4, owners: svc})
			d := gateway.NewBatchDispatcher(s.mount.Handler, 0)
			owner, created, fall := c.owner(t, svc, rv)
			l := line(owner, openai.PathChatCompletions, chatBody)
			l.Created = created
			res, err := d.Dispatch(ctx, l)
			if err != nil || res.StatusCode != 200 || res.Failed() {
				t.Fatalf("while the owner stands: %d %v %s", res.StatusCode, err, res.Body)
			}
			before := s.sim.Stats().Requests
			fall()
			for i := range 3 {
				l.Index, l.CustomID = i+2, "req-after"
				res, err := d.Dispatch(ctx, l)
				if err != nil || res.StatusCode != c.status || !res.Failed() || res.Usage != nil {
					t.Fatalf("after the owner fell: %d %v %s", res.StatusCode, err, res.Body)
				}
				if !strings.Contains(string(res.Body), `"code":"`+c.code+`"`) || !strings.Contains(string(res.Body), `"error":{`) {
					t.Fatalf("answer %s, want OpenAI's error with code %s", res.Body, c.code)
				}
			}
			if after := s.sim.Stats().Requests; after != before {
				t.Fatalf("the replica got %d requests after the owner fell", after-before)
			}
		})
	}
}

// TestBatchLineOfOwnerRevokedBefore: a revocation of a user before the
// batch was created (a new login since) leaves the batch's lines alone,
// and an API key past its expiry stops them with its own code.
func TestBatchLineOfOwnerRevokedBefore(t *testing.T) {
	ctx := context.Background()
	rv := &revocations{}
	svc := credentials(t, rv)
	s := newBatchSite(t, siteOpts{slots: 4, owners: svc})
	d := gateway.NewBatchDispatcher(s.mount.Handler, 0)
	cut, _ := rv.RevokeUser(ctx, "bob", "user")
	l := line(batch.Owner{Subject: "bob", Scopes: []string{"model:qwen"}}, openai.PathChatCompletions, chatBody)
	l.Created = cut.Add(time.Second)
	if res, err := d.Dispatch(ctx, l); err != nil || res.StatusCode != 200 {
		t.Fatalf("batch created after the revocation: %d %v %s", res.StatusCode, err, res.Body)
	}
	_, info, err := svc.APIKeys().Create(ctx, auth.NewAPIKey{User: "alice", TTL: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	l = line(batch.Owner{Subject: "alice", KeyID: info.ID, Scopes: []string{"model:qwen"}}, openai.PathChatCompletions, chatBody)
	l.Created = time.Now()
	res, err := d.Dispatch(ctx, l)
	if err != nil || res.StatusCode != 401 || !strings.Contains(string(res.Body), `"code":"`+gateway.CodeExpiredAPIKey+`"`) {
		t.Fatalf("expired key: %d %v %s", res.StatusCode, err, res.Body)
	}
}
