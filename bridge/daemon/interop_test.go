package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
)

// npmClients installs the npm clients of the interop test with the scripts
// that drive them.
func npmClients(t *testing.T) string {
	t.Helper()
	return npmInstall(t, []string{"simple-oauth2@0.2.1", "openid-client@6"}, "simple-oauth2-0.2.1.js", "openid-client-6.mjs")
}

// npmInstall installs npm packages into a temporary directory beside the
// scripts of testdata/interop named, and returns the directory. Without
// node and npm the test is skipped, except under CI=true, where it fails.
func npmInstall(t *testing.T, packages []string, scripts ...string) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed; the interop test needs node and npm (CI=true: not skipped)", tool)
			}
			t.Skipf("%s is not installed: skipping the interop test with real npm clients", tool)
		}
	}
	if testing.Short() {
		t.Skip("-short: skipping npm install")
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := append([]string{"install", "--no-audit", "--no-fund", "--no-save", "--prefix", dir}, packages...)
	cmd := exec.CommandContext(ctx, "npm", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install: %v\n%s", err, out)
	}
	for _, s := range scripts {
		b, err := os.ReadFile(filepath.Join("testdata", "interop", s))
		if err != nil {
			t.Fatal(err)
		}
		// Beside node_modules, so that node finds the packages.
		if err := os.WriteFile(filepath.Join(dir, s), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runClient runs a client script against the hub as the user "alice": it
// reads the authorization URL the script prints, logs in and consents to
// the kitchen light like a browser, hands the script the callback URL and
// returns the script's RESULT.
func runClient(t *testing.T, h *daemontest.Harness, dir, script string, app daemontest.App) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HUB="+h.URL, "CLIENT_ID="+app.ClientID, "CLIENT_SECRET="+app.Secret, "REDIRECT="+app.RedirectURIs[0])
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var result map[string]any
	lines := bufio.NewScanner(io.LimitReader(stdout, 1<<20))
	for lines.Scan() {
		line := lines.Text()
		switch {
		case strings.HasPrefix(line, "AUTH_URL "):
			authURL := strings.TrimPrefix(line, "AUTH_URL ")
			b := h.NewBrowser()
			consent := b.Login(t, authURL, "alice", "alice-pw")
			p := b.Consent(t, consent, authURL, 1, "kitchen")
			if p.StatusCode != http.StatusSeeOther {
				t.Fatalf("%s: consent answered %d\n%s", script, p.StatusCode, p.Body)
			}
			io.WriteString(stdin, p.Header.Get("Location")+"\n")
		case strings.HasPrefix(line, "RESULT "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "RESULT ")), &result); err != nil {
				t.Fatalf("%s: %v in %s", script, err, line)
			}
		default:
			t.Logf("%s: %s", script, line)
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil || result == nil {
		t.Fatalf("%s: %v\n%s", script, err, stderr.String())
	}
	return result
}

// withoutLastSeen is a list of switches as JSON, each checked to carry a
// last_seen (a virtual switch is seen whenever the hub sets it) and then
// without it, to compare with a fixed answer.
func withoutLastSeen(t *testing.T, list any) string {
	t.Helper()
	sws, _ := list.([]any)
	for _, s := range sws {
		m, _ := s.(map[string]any)
		if ls, _ := m["last_seen"].(string); ls == "" {
			t.Errorf("switch %v has no last_seen", m)
		} else if _, err := time.Parse(time.RFC3339Nano, ls); err != nil {
			t.Errorf("last_seen %q: %v", ls, err)
		}
		delete(m, "last_seen")
	}
	b, _ := json.Marshal(list)
	return string(b)
}

// TestInteropNPMClients runs real npm clients, unchanged, against a running
// hub: simple-oauth2 0.2.1 as the original platform's example used it, and
// openid-client 6 configured by discovery().
func TestInteropNPMClients(t *testing.T) {
	dir := npmClients(t)
	h := daemontest.Start(t, hubConfig)
	alice := h.AddUser(t, "alice", "alice-pw", 1)
	// The callback is never fetched: the test reads the hub's redirect.
	app := h.AddApp(t, alice, true, "http://127.0.0.1:9/callback")

	t.Run("simple-oauth2 0.2.1", func(t *testing.T) {
		r := runClient(t, h, dir, "simple-oauth2-0.2.1.js", app)
		sw := withoutLastSeen(t, r["switches"])
		if !strings.HasPrefix(r["url"].(string), "/api/apps/installations/") || string(sw) != `[{"available":true,"id":"kitchen","name":"Kitchen light","value":"off"}]` {
			t.Errorf("discovery and list = %v", r)
		}
		if r["refreshed"] != true || r["revokedStatus"] != float64(401) || r["libraryError"] != "invalid_token" {
			t.Errorf("refresh and revoke = %v", r)
		}
		if st := mustSwitch(t, h, "kitchen").Device.State(); st.Value != "on" {
			t.Errorf("kitchen = %s after the client's PUT /switches/on", st.Value)
		}
	})
	t.Run("openid-client 6", func(t *testing.T) {
		r := runClient(t, h, dir, "openid-client-6.mjs", app)
		sw := withoutLastSeen(t, r["afterRefresh"])
		if r["issuer"] != h.URL || !strings.HasPrefix(r["uri"].(string), h.URL+"/api/apps/installations/") ||
			string(sw) != `[{"available":true,"id":"kitchen","name":"Kitchen light","value":"on"}]` {
			t.Errorf("discovery, code flow and list = %v", r)
		}
		if r["refreshed"] != true || r["revokedStatus"] != float64(401) {
			t.Errorf("refresh and revoke = %v", r)
		}
	})
}
