package oauth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
)

// awayStore is a real store whose app registry, refreshes and
// revocations fail, while away is set, as they do when PostgreSQL cannot
// be reached (bridge/store marks such errors EUNAVAILABLE).
type awayStore struct {
	*accounts.Store
	appsAway, writesAway atomic.Bool
}

var errAway = &bridge.Error{Code: bridge.EUNAVAILABLE, Message: "the database is away", RetryAfter: 2 * time.Second}

func (s *awayStore) App(ctx context.Context, id string) (*bridge.App, error) {
	if s.appsAway.Load() {
		return nil, fmt.Errorf("reading app %s: %w", id, errAway)
	}
	return s.Store.App(ctx, id)
}

func (s *awayStore) Refresh(ctx context.Context, h []byte, check func(bridge.RefreshToken) error, issued bridge.TokenPair) (*bridge.RefreshToken, error) {
	if s.writesAway.Load() {
		return nil, errAway
	}
	return s.Store.Refresh(ctx, h, check, issued)
}

func (s *awayStore) RevokeToken(ctx context.Context, h []byte, clientID string) (bridge.Revoked, error) {
	if s.writesAway.Load() {
		return bridge.RevokedNothing, errAway
	}
	return s.Store.RevokeToken(ctx, h, clientID)
}

// With its store away the token and revocation endpoints answer 503
// temporarily_unavailable with Retry-After: not 500, and not
// invalid_client, which would tell a client its credentials are wrong.
// A client that does not exist is still invalid_client. The authorization
// page is 503 too, not a page saying the app is unknown.
func TestAnswersWhileTheStoreIsAway(t *testing.T) {
	f := newIssuerFixture(t)
	st := &awayStore{Store: f.db}
	srv := oauth.New(st, f.hub, nil, oauth.Options{})
	mux := http.NewServeMux()
	srv.Register(mux)
	post := func(path, client, secret string, form url.Values) (*httptest.ResponseRecorder, map[string]string) {
		req := httptest.NewRequest("POST", path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(client, secret)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		var body map[string]string
		json.Unmarshal(w.Body.Bytes(), &body)
		return w, body
	}
	refresh := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"no-such-token"}}
	revoke := url.Values{"token": {"no-such-token"}}
	for _, c := range []struct {
		name             string
		apps, writes     bool
		path, client     string
		form             url.Values
		status           int
		code, retryAfter string
	}{
		{"refresh, registry away", true, false, "/oauth/token", "app1", refresh, 503, "temporarily_unavailable", "2"},
		{"revoke, registry away", true, false, "/oauth/revoke", "app1", revoke, 503, "temporarily_unavailable", "2"},
		{"refresh, writes away", false, true, "/oauth/token", "app1", refresh, 503, "temporarily_unavailable", "2"},
		{"revoke, writes away", false, true, "/oauth/revoke", "app1", revoke, 503, "temporarily_unavailable", "2"},
		{"refresh, unknown client", false, false, "/oauth/token", "nobody", refresh, 401, "invalid_client", ""},
		{"refresh, unknown token", false, false, "/oauth/token", "app1", refresh, 400, "invalid_grant", ""},
	} {
		st.appsAway.Store(c.apps)
		st.writesAway.Store(c.writes)
		w, body := post(c.path, c.client, "s", c.form)
		if w.Code != c.status || body["error"] != c.code || w.Header().Get("Retry-After") != c.retryAfter {
			t.Errorf("%s: %d %q Retry-After %q, want %d %q Retry-After %q (%s)", c.name, w.Code, body["error"], w.Header().Get("Retry-After"),
				c.status, c.code, c.retryAfter, w.Body)
		}
	}

	st.appsAway.Store(true)
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", "/oauth/authorize?response_type=code&client_id=app1&redirect_uri=https%3A%2F%2Fx%2Fcb&state=s", nil))
	if w.Code != 503 || w.Header().Get("Retry-After") != "2" || strings.Contains(w.Body.String(), "registered") {
		t.Errorf("the authorization page with the registry away: %d Retry-After %q\n%s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
	st.appsAway.Store(false)
	w = httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", "/oauth/authorize?response_type=code&client_id=nobody&redirect_uri=https%3A%2F%2Fx%2Fcb&state=s", nil))
	if w.Code != 400 || !strings.Contains(w.Body.String(), "not a registered app") {
		t.Errorf("the authorization page for an unknown app: %d\n%s", w.Code, w.Body)
	}
}
