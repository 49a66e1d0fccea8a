package daemon_test

import (
	"context"
	"encoding/json"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
	"github.com/switchbridge/switchbridge/bridge/store"
)

func postForm(t *testing.T, h *daemontest.Harness, path string, form url.Values, user, pass string) *daemontest.Page {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return &daemontest.Page{Response: resp, Body: sb.String()}
}

func status(t *testing.T, h *daemontest.Harness, uri, token string) int {
	t.Helper()
	return h.Call(t, http.MethodGet, uri+"/switches", token).StatusCode
}

// TestRefreshRotationAndReuseWithOAuth2: golang.org/x/oauth2 refreshes an
// expired access token by itself; each refresh rotates the refresh token;
// presenting a spent one revokes every token of the grant.
func TestRefreshRotationAndReuseWithOAuth2(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	if err := h.Accounts.SetAppAccessTokenLifetime(context.Background(), f.app.ClientID, time.Second); err != nil {
		t.Fatal(err)
	}
	g := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen")
	tok0 := g.Token
	if tok0.RefreshToken == "" {
		t.Fatal("no refresh_token in the token response")
	}
	if left := time.Until(tok0.Expiry); left > 2*time.Second {
		t.Errorf("access token expires in %s; the app's lifetime is 1s", left)
	}
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, h.Client)
	cfg := h.OAuthConfig(f.app)
	ts := cfg.TokenSource(ctx, tok0)

	time.Sleep(1100 * time.Millisecond)
	if st := status(t, h, g.URI, tok0.AccessToken); st != http.StatusUnauthorized {
		t.Fatalf("expired access token = %d, want 401", st)
	}
	// The client refreshes on its own and carries on.
	resp, err := oauth2.NewClient(ctx, ts).Get(g.URI + "/switches")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("API through the refreshing client = %d", resp.StatusCode)
	}
	tok1, err := ts.Token()
	if err != nil {
		t.Fatal(err)
	}
	if tok1.AccessToken == tok0.AccessToken || tok1.RefreshToken == "" || tok1.RefreshToken == tok0.RefreshToken {
		t.Fatalf("refresh did not rotate: %+v", tok1)
	}
	if tok1.Extra("scope") != "app" {
		t.Errorf("refreshed scope = %v", tok1.Extra("scope"))
	}

	// The spent refresh token again: refused, and the grant revoked.
	_, err = cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: tok0.RefreshToken}).Token()
	assertOAuthError(t, err, "invalid_grant")
	if p := h.Call(t, http.MethodGet, g.URI+"/switches", tok1.AccessToken); p.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(p.Header.Get("WWW-Authenticate"), "revoked") {
		t.Errorf("newest access token after the reuse = %d %q, want 401 revoked", p.StatusCode, p.Header.Get("WWW-Authenticate"))
	}
	_, err = cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: tok1.RefreshToken}).Token()
	assertOAuthError(t, err, "invalid_grant")

	// Another client cannot spend a refresh token, and trying does not
	// spend it.
	g2 := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen")
	other := h.AddApp(t, f.alice, true, redirect)
	_, err = h.OAuthConfig(other).TokenSource(ctx, &oauth2.Token{RefreshToken: g2.Token.RefreshToken}).Token()
	assertOAuthError(t, err, "invalid_grant")
	if _, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: g2.Token.RefreshToken}).Token(); err != nil {
		t.Errorf("refresh after another client tried the token: %v", err)
	}

	// Refresh rules at the wire.
	for _, c := range []struct {
		name   string
		form   url.Values
		status int
		err    string
	}{
		{"missing refresh_token", url.Values{"grant_type": {"refresh_token"}}, 400, "invalid_request"},
		{"unknown refresh_token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"nope"}}, 400, "invalid_grant"},
		{"wider scope", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"nope"}, "scope": {"app admin"}}, 400, "invalid_scope"},
	} {
		p := postForm(t, h, "/oauth/token", c.form, f.app.ClientID, f.app.Secret)
		var e struct{ Error string }
		json.Unmarshal([]byte(p.Body), &e)
		if p.StatusCode != c.status || e.Error != c.err {
			t.Errorf("%s: %d %s, want %d %s", c.name, p.StatusCode, p.Body, c.status, c.err)
		}
	}
}

// TestRevocation: POST /oauth/revoke (RFC 7009) takes tokens back at once,
// for this process and for another one writing the same database.
func TestRevocation(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	other := h.AddApp(t, f.bob, true, redirect)
	revoke := func(a daemontest.App, token, hint string) *daemontest.Page {
		t.Helper()
		form := url.Values{"token": {token}}
		if hint != "" {
			form.Set("token_type_hint", hint)
		}
		return postForm(t, h, "/oauth/revoke", form, a.ClientID, a.Secret)
	}
	g := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen")
	if st := status(t, h, g.URI, g.Token.AccessToken); st != http.StatusOK {
		t.Fatalf("token before revocation = %d", st)
	}

	// Another client's revocation answers 200 and revokes nothing.
	if p := revoke(other, g.Token.AccessToken, ""); p.StatusCode != http.StatusOK {
		t.Errorf("another client's token = %d %s, want 200", p.StatusCode, p.Body)
	}
	if p := revoke(other, g.Token.RefreshToken, "refresh_token"); p.StatusCode != http.StatusOK {
		t.Errorf("another client's refresh token = %d %s, want 200", p.StatusCode, p.Body)
	}
	if st := status(t, h, g.URI, g.Token.AccessToken); st != http.StatusOK {
		t.Fatalf("another client revoked the token: %d", st)
	}
	// An unknown token: 200 as well.
	if p := revoke(f.app, "no-such-token", "access_token"); p.StatusCode != http.StatusOK || p.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("unknown token = %d %q", p.StatusCode, p.Header.Get("Cache-Control"))
	}
	// Refusals.
	if p := postForm(t, h, "/oauth/revoke", url.Values{}, f.app.ClientID, f.app.Secret); p.StatusCode != http.StatusBadRequest || !strings.Contains(p.Body, "invalid_request") {
		t.Errorf("no token = %d %s", p.StatusCode, p.Body)
	}
	if p := postForm(t, h, "/oauth/revoke", url.Values{"token": {g.Token.AccessToken}}, f.app.ClientID, "wrong"); p.StatusCode != http.StatusUnauthorized || !strings.Contains(p.Body, "invalid_client") {
		t.Errorf("wrong secret = %d %s", p.StatusCode, p.Body)
	}
	if p := postForm(t, h, "/oauth/revoke", url.Values{"token": {g.Token.AccessToken}, "client_id": {f.app.ClientID}, "client_secret": {f.app.Secret}}, "", ""); p.StatusCode != http.StatusOK {
		t.Errorf("form credentials = %d %s", p.StatusCode, p.Body)
	}
	// That last one revoked the access token, at once.
	if p := h.Call(t, http.MethodGet, g.URI+"/switches", g.Token.AccessToken); p.StatusCode != http.StatusUnauthorized || !strings.Contains(p.Header.Get("WWW-Authenticate"), "revoked") {
		t.Errorf("revoked access token = %d %q", p.StatusCode, p.Header.Get("WWW-Authenticate"))
	}
	if p := h.Call(t, http.MethodGet, h.URL+"/api/apps/endpoints", g.Token.AccessToken); p.StatusCode != http.StatusUnauthorized {
		t.Errorf("discovery with the revoked token = %d", p.StatusCode)
	}
	// The refresh token of the grant still works: revoking an access token
	// takes back that token only.
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, h.Client)
	cfg := h.OAuthConfig(f.app)
	tok1, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: g.Token.RefreshToken}).Token()
	if err != nil {
		t.Fatalf("refresh after revoking the access token: %v", err)
	}
	// Revoking the refresh token takes the whole grant.
	if p := revoke(f.app, tok1.RefreshToken, "refresh_token"); p.StatusCode != http.StatusOK {
		t.Fatalf("revoke refresh token = %d %s", p.StatusCode, p.Body)
	}
	if st := status(t, h, g.URI, tok1.AccessToken); st != http.StatusUnauthorized {
		t.Errorf("access token of a revoked grant = %d", st)
	}
	_, err = cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: tok1.RefreshToken}).Token()
	assertOAuthError(t, err, "invalid_grant")

	// Another process (the CLI) revoking in the same database: the hub
	// refuses the token at its next request, with no cache window.
	g2 := h.Authorize(t, f.app, "bob", "bob-pw", 2, "garage-light")
	if st := status(t, h, g2.URI, g2.Token.AccessToken); st != http.StatusOK {
		t.Fatalf("fresh token = %d", st)
	}
	cli, err := store.Open(context.Background(), h.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if got, err := accounts.New(cli).RevokeToken(context.Background(), oauth.Hash(g2.Token.AccessToken), f.app.ClientID); got != bridge.RevokedAccessToken || err != nil {
		t.Fatalf("revoke from another handle: %v %v", got, err)
	}
	if st := status(t, h, g2.URI, g2.Token.AccessToken); st != http.StatusUnauthorized {
		t.Errorf("token revoked by another process = %d, want 401 at once", st)
	}

	// GET is not how a revocation is asked for.
	if p := h.Call(t, http.MethodGet, h.URL+"/oauth/revoke", ""); p.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /oauth/revoke = %d", p.StatusCode)
	}
}

// TestMetadata: RFC 8414 metadata names the endpoints that answer.
func TestMetadata(t *testing.T) {
	h := daemontest.Start(t, hubConfig)
	p := h.Call(t, http.MethodGet, h.URL+"/.well-known/oauth-authorization-server", "")
	if p.StatusCode != http.StatusOK || !strings.HasPrefix(p.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("metadata = %d %q", p.StatusCode, p.Header.Get("Content-Type"))
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(p.Body), &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"issuer":                                         h.URL,
		"authorization_endpoint":                         h.URL + "/oauth/authorize",
		"token_endpoint":                                 h.URL + "/oauth/token",
		"revocation_endpoint":                            h.URL + "/oauth/revoke",
		"response_types_supported":                       []any{"code"},
		"grant_types_supported":                          []any{"authorization_code", "refresh_token"},
		"token_endpoint_auth_methods_supported":          []any{"client_secret_basic", "client_secret_post"},
		"revocation_endpoint_auth_methods_supported":     []any{"client_secret_basic", "client_secret_post"},
		"code_challenge_methods_supported":               []any{"S256"},
		"scopes_supported":                               []any{"app"},
		"authorization_response_iss_parameter_supported": true,
	}
	for k, v := range want {
		got, _ := json.Marshal(m[k])
		exp, _ := json.Marshal(v)
		if string(got) != string(exp) {
			t.Errorf("%s = %s, want %s", k, got, exp)
		}
	}
	// Each endpoint it names is served: a POST without credentials is
	// refused by client authentication, not 404.
	for _, k := range []string{"token_endpoint", "revocation_endpoint"} {
		resp, err := h.Client.PostForm(m[k].(string), url.Values{})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s answers %d, want 401", k, resp.StatusCode)
		}
	}
}

// TestLegacyApp: a legacy app's token is accepted in the query string and
// by the original platform's discovery by client id; no other app's is,
// and the query string never reaches the log.
func TestLegacyApp(t *testing.T) {
	logs := &logtest.Buffer{}
	h := daemontest.StartWith(t, daemontest.Options{Config: hubConfig, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	alice := h.AddUser(t, "alice", "alice-pw", 1)
	legacy := h.AddApp(t, alice, true, redirect)
	modern := h.AddApp(t, alice, true, redirect)
	ctx := context.Background()
	if err := h.Accounts.SetAppLegacy(ctx, legacy.ClientID, true); err != nil {
		t.Fatal(err)
	}
	lg := h.Authorize(t, legacy, "alice", "alice-pw", 1, "kitchen")
	mg := h.Authorize(t, modern, "alice", "alice-pw", 1, "hall")
	q := func(tok string) string { return "?access_token=" + url.QueryEscape(tok) }

	checks := []struct {
		name   string
		method string
		url    string
		status int
	}{
		{"legacy: list in the query string", "GET", lg.URI + "/switches" + q(lg.Token.AccessToken), 200},
		{"legacy: command in the query string", "PUT", lg.URI + "/switches/on" + q(lg.Token.AccessToken), 204},
		{"legacy: discovery in the query string", "GET", h.URL + "/api/smartapps/endpoints" + q(lg.Token.AccessToken), 200},
		{"legacy: discovery by its client id", "GET", h.URL + "/api/smartapps/endpoints/" + legacy.ClientID + q(lg.Token.AccessToken), 200},
		{"legacy: discovery by another client id", "GET", h.URL + "/api/smartapps/endpoints/" + modern.ClientID + q(lg.Token.AccessToken), 404},
		{"modern: list in the query string", "GET", mg.URI + "/switches" + q(mg.Token.AccessToken), 400},
		{"modern: command in the query string", "PUT", mg.URI + "/switches/off" + q(mg.Token.AccessToken), 400},
		{"modern: discovery in the query string", "GET", h.URL + "/api/apps/endpoints" + q(mg.Token.AccessToken), 400},
		{"modern: discovery by its own client id", "GET", h.URL + "/api/smartapps/endpoints/" + modern.ClientID, 404},
		{"legacy token on the modern installation", "GET", mg.URI + "/switches" + q(lg.Token.AccessToken), 403},
	}
	for _, c := range checks {
		tok := ""
		if !strings.Contains(c.url, "access_token=") {
			tok = mg.Token.AccessToken
		}
		p := h.Call(t, c.method, c.url, tok)
		if p.StatusCode != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, p.StatusCode, p.Body, c.status)
		}
	}
	if st := mustSwitch(t, h, "hall").Device.State(); st.Value != bridge.On {
		t.Errorf("hall = %s: the refused query-string command was carried out", st.Value)
	}
	if st := mustSwitch(t, h, "kitchen").Device.State(); st.Value != bridge.On {
		t.Errorf("kitchen = %s after the legacy command", st.Value)
	}
	var eps []oauth.Endpoint
	p := h.Call(t, http.MethodGet, h.URL+"/api/smartapps/endpoints/"+legacy.ClientID+q(lg.Token.AccessToken), "")
	if err := json.Unmarshal([]byte(p.Body), &eps); err != nil || len(eps) != 1 || eps[0].URI != lg.URI || eps[0].OAuthClient.ClientID != legacy.ClientID {
		t.Errorf("discovery by client id = %s", p.Body)
	}

	// Turned off by another process (the CLI), at once.
	cli, err := store.Open(ctx, h.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if err := accounts.New(cli).SetAppLegacy(ctx, legacy.ClientID, false); err != nil {
		t.Fatal(err)
	}
	if p := h.Call(t, http.MethodGet, lg.URI+"/switches"+q(lg.Token.AccessToken), ""); p.StatusCode != http.StatusBadRequest {
		t.Errorf("query token after legacy off = %d", p.StatusCode)
	}

	// No token or query string in the log.
	log := logs.String()
	if !strings.Contains(log, "api request") {
		t.Fatalf("no api request lines in the log:\n%s", log)
	}
	for _, secret := range []string{lg.Token.AccessToken, mg.Token.AccessToken, "access_token="} {
		if strings.Contains(log, secret) {
			t.Errorf("the log holds %q:\n%s", secret, log)
		}
	}
}

// TestQueryTokenOfAnAppNotLegacyIsNoUse: a token sent in the query string
// for an app that is not legacy is answered 400 and does not count as a
// use on the connected apps page; the same token in the header does.
func TestQueryTokenOfAnAppNotLegacyIsNoUse(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	ctx := context.Background()
	in := &bridge.Installation{ClientID: f.app.ClientID, UserID: f.alice.ID, LocationID: 1, SwitchIDs: []string{"kitchen"}}
	if err := h.Accounts.Install(ctx, in); err != nil {
		t.Fatal(err)
	}
	token := oauth.NewSecret()
	if err := h.Accounts.CreateToken(ctx, oauth.Hash(token), in.ID, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	lastUsed := func() time.Time {
		got, err := h.Accounts.Installation(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.LastUsedAt
	}
	uri := h.URL + "/api/apps/installations/" + in.ID
	for _, u := range []string{uri + "/switches?access_token=" + token, h.URL + "/api/apps/endpoints?access_token=" + token} {
		if p := h.CallAuth(t, "GET", u, ""); p.StatusCode != http.StatusBadRequest {
			t.Fatalf("GET %s: %d %s, want 400", u, p.StatusCode, p.Body)
		}
	}
	// A use is written behind the request within milliseconds.
	time.Sleep(300 * time.Millisecond)
	if at := lastUsed(); !at.IsZero() {
		t.Errorf("requests answered 400 were recorded as a use at %v", at)
	}
	if p := h.Call(t, "GET", uri+"/switches", token); p.StatusCode != http.StatusOK {
		t.Fatalf("the token in the header: %d %s", p.StatusCode, p.Body)
	}
	for deadline := time.Now().Add(5 * time.Second); lastUsed().IsZero(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the accepted request was not recorded as a use")
		}
	}
}
