package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/infra/certs/certstest"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
)

// TestSecretFilesReadableByOthersWarn: a TLS key and a platform secret
// file that every user can read are reported by check-config, at their
// lines, and logged by serve, which still starts (a warning, as Mosquitto
// gives), and again at each reload; with the group's read access only, neither says a word. A
// driver's secret file (the MQTT client key) is checked too.
func TestSecretFilesReadableByOthersWarn(t *testing.T) {
	ca := certstest.NewCA(t)
	pair := ca.NewPair(t, 1)
	dir := t.TempDir()
	cfg, _ := writeTLSConfig(t, dir, pair.CertFile, pair.KeyFile)
	secret := filepath.Join(dir, "hub.secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	body, _ := os.ReadFile(cfg)
	secretLine := strings.Count(string(body), "\n") + 4
	body = fmt.Appendf(body, "platform:\n  url: http://%s\n  hub_id: hub-1\n  secret_file: %s\n", freePort(t), secret)
	if err := os.WriteFile(cfg, body, 0o600); err != nil {
		t.Fatal(err)
	}
	chmod := func(mode os.FileMode) {
		for _, f := range []string{pair.KeyFile, secret} {
			if err := os.Chmod(f, mode); err != nil { // not the umask's say
				t.Fatal(err)
			}
		}
	}
	const exposed = "can be read by every user of this machine"

	chmod(0o644)
	r := runCLI(t, "", "check-config", "--config", cfg)
	for _, want := range []string{
		fmt.Sprintf("%s:4: warning: server.tls.key_file %s %s (mode 0644)", cfg, pair.KeyFile, exposed),
		fmt.Sprintf("%s:%d: warning: platform.secret_file %s %s (mode 0644)", cfg, secretLine, secret, exposed),
	} {
		if r.code != 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("check-config with 0644 secrets: %+v\nwant exit 0 and %q", r, want)
		}
	}
	p := startDaemon(t, cfg)
	warned := func(times int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			log := p.stderr.String()
			if strings.Count(log, "server.tls.key_file "+pair.KeyFile+" "+exposed) >= times &&
				strings.Count(log, "platform.secret_file "+secret+" "+exposed) >= times {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("serve did not warn of both files (%d times):\n%s", times, log)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	warned(1)
	// Again at a reload (a renewal hook's SIGHUP).
	p.cmd.Process.Signal(syscall.SIGHUP)
	warned(2)

	chmod(0o640)
	if r := runCLI(t, "", "check-config", "--config", cfg); r.code != 0 || strings.Contains(r.stderr, exposed) {
		t.Errorf("check-config with 0640 secrets: %+v", r)
	}

	// A driver's secret file: the MQTT client key for an ssl:// broker.
	mq := filepath.Join(dir, "mqtt.yaml")
	os.Chmod(pair.KeyFile, 0o604)
	os.WriteFile(mq, fmt.Appendf(nil, `server:
  listen: %s
  metrics_listen: "off"
data_dir: %s
mqtt:
  broker: ssl://127.0.0.1:8883
  tls: {cert: %q, key: %q}
locations:
  - id: 1
    name: Home
    switches:
      - {id: tas, name: Plug, driver: mqtt, profile: tasmota, topic: tas1}
`, freePort(t), filepath.Join(dir, "data2"), pair.CertFile, pair.KeyFile), 0o600)
	want := fmt.Sprintf("warning: mqtt.tls.key %s %s (mode 0604)", pair.KeyFile, exposed)
	if r := runCLI(t, "", "check-config", "--config", mq); r.code != 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("check-config with a 0604 MQTT client key: %+v\nwant %q", r, want)
	}
}

// TestDSNPastedAsDSNFile: a connection string pasted where its file's path
// belongs fails check-config and serve with the key's line, and neither
// says the password, the host or anything else of the value.
func TestDSNPastedAsDSNFile(t *testing.T) {
	dir := t.TempDir()
	const password = "Pasted-Pw-4f1c9e"
	for i, dsn := range []string{
		"postgres://switchbridge:" + password + "@db.example.lan:5432/switchbridge",
		"'host=db.example.lan user=switchbridge password=" + password + "'",
	} {
		path := filepath.Join(dir, fmt.Sprintf("platform-%d.yaml", i))
		body := fmt.Sprintf("server:\n  listen: %s\n  metrics_listen: \"off\"\ndata_dir: %s\nstorage:\n  postgres:\n    dsn_file: %s\n",
			freePort(t), filepath.Join(dir, "data"), dsn)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, cmd := range []string{"check-config", "serve"} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			var out, errb bytes.Buffer
			code := run(ctx, []string{cmd, "--config", path}, strings.NewReader(""), &out, &errb, nil)
			cancel()
			want := path + ":7: storage.postgres.dsn_file must be the path of a file"
			if code != 1 || !strings.Contains(errb.String(), want) {
				t.Errorf("%s with dsn_file %s: exit %d, stderr %q; want exit 1 and %q", cmd, dsn, code, errb.String(), want)
			}
			for _, part := range []string{password, "db.example.lan"} {
				if strings.Contains(out.String()+errb.String(), part) {
					t.Errorf("%s repeats %q of the pasted connection string:\n%s%s", cmd, part, out.String(), errb.String())
				}
			}
		}
	}
}

// capturingTB is the test's testing.TB, except that what it is asked to
// clean up is kept (to be run by the test) and its errors are recorded,
// not reported.
type capturingTB struct {
	*testing.T
	cleanups []func()
	errors   []string
}

func (c *capturingTB) Cleanup(f func()) { c.cleanups = append(c.cleanups, f) }
func (c *capturingTB) Errorf(format string, a ...any) {
	c.errors = append(c.errors, fmt.Sprintf(format, a...))
}

// TestSecretScanOfAProcess proves the scan of serve's output can fail: a
// noted secret that serve writes (here planted in the path of a TLS
// certificate it cannot open, which its error names) is reported when
// the test ends, with the line and the config of the process.
func TestSecretScanOfAProcess(t *testing.T) {
	skipIfEmulated(t)
	secret := "planted-" + oauth.NewSecret()
	logtest.NoteSecret(secret)
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	body, _ := os.ReadFile(cfg)
	body = bytes.Replace(body, []byte("  metrics_listen: \"off\"\n"),
		fmt.Appendf(nil, "  metrics_listen: \"off\"\n  tls: {cert_file: %s, key_file: %s}\n", filepath.Join(dir, secret+".pem"), filepath.Join(dir, "k.pem")), 1)
	if err := os.WriteFile(cfg, body, 0o600); err != nil {
		t.Fatal(err)
	}
	tb := &capturingTB{T: t}
	p := runServe(tb, cfg, serveOptions{})
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit on a certificate file that is not there")
	}
	for i := len(tb.cleanups) - 1; i >= 0; i-- {
		tb.cleanups[i]()
	}
	if len(tb.errors) != 1 || !strings.Contains(tb.errors[0], "serve --config "+cfg+" (its log or metrics) logged a secret") ||
		!strings.Contains(tb.errors[0], logtest.Redact(secret)) {
		t.Errorf("the scan at the test's end reported %q; want the planted secret, once", tb.errors)
	}
}
