package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestWebhookSurvivesKill9: a change queued for a receiver that is down
// is delivered after the daemon was killed with SIGKILL and started
// again: the outbox is in the database.
func TestWebhookSurvivesKill9(t *testing.T) {
	dir := t.TempDir()
	cfg, addr := writeConfig(t, dir)
	app := addDeveloperApp(t, cfg, "1")
	p := startDaemon(t, cfg, addr)
	r := runCLI(t, "", "install", "--client-id", app.ID, "--user", "alice", "--location", "1", "--switch", "lamp", "--json", "--config", cfg)
	var inst struct{ Token, Endpoint string }
	if err := json.Unmarshal([]byte(r.stdout), &inst); err != nil {
		t.Fatalf("install: %+v", r)
	}

	// A receiver that confirms, then is down (503) until told otherwise.
	var mu sync.Mutex
	up, attempts := true, 0
	var delivered [][]byte
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		var m struct {
			Type string
			Data struct{ Challenge string }
		}
		json.Unmarshal(body, &m)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case m.Type == "webhook.confirm":
			json.NewEncoder(w).Encode(map[string]string{"challenge": m.Data.Challenge})
		case !up:
			attempts++
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			delivered = append(delivered, body)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	req, _ := http.NewRequest(http.MethodPost, inst.Endpoint+"/webhooks", strings.NewReader(`{"url":"http://`+ln.Addr().String()+`/hook"}`))
	req.Header.Set("Authorization", "Bearer "+inst.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /webhooks = %d %s", resp.StatusCode, b.String())
	}
	mu.Lock()
	up = false
	mu.Unlock()
	if code, body := call(t, http.MethodPut, inst.Endpoint+"/switches/on", inst.Token); code != http.StatusNoContent {
		t.Fatalf("PUT on = %d %s", code, body)
	}
	// Tried once (so it is in the outbox), then killed.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		mu.Lock()
		n := attempts
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no delivery attempt within 15 s")
		}
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done

	mu.Lock()
	up = true
	mu.Unlock()
	startDaemon(t, cfg, addr)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		got := append([][]byte(nil), delivered...)
		mu.Unlock()
		if len(got) > 0 {
			if len(got) != 1 || !strings.Contains(string(got[0]), `"id":"lamp"`) || !strings.Contains(string(got[0]), `"value":"on"`) {
				t.Errorf("delivered after kill -9: %q", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the queued change was not delivered within 30 s of the restart")
		}
	}
	// The owner sees the webhook and its state.
	if r := runCLI(t, "", "installation", "list", "--config", cfg); r.code != 0 || !strings.Contains(r.stdout, "WEBHOOKS") || !strings.Contains(r.stdout, "1 active") {
		t.Errorf("installation list: %+v", r)
	}
}
