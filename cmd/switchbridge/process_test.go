package main

// The daemon as a real process for tests: serve started on a config,
// ready once it says so, and started again on other ports when a port
// picked free was taken before the daemon could bind it.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
	"github.com/switchbridge/switchbridge/bridge/infra/porttest"
)

// freePort returns a loopback address whose port nothing listens on now
// and that no other pick of this test process named. Another process may
// take it before a daemon binds it: startServe then moves the daemon to
// another port.
func freePort(t testing.TB) string {
	t.Helper()
	port, err := porttest.Free()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// daemonProcess is the real binary (this test binary re-executed, or a
// switchbridge binary built by the test) running serve.
type daemonProcess struct {
	cmd    *exec.Cmd
	stderr *logtest.Buffer
	done   chan struct{} // closed when the process has exited
	err    error         // its exit status, once done is closed
	// addr is where the API listens (server.listen), metrics where the
	// metrics do ("off" for none), as the daemon logged them when ready.
	addr, metrics string
}

// serveOptions are how startServe runs a daemon.
type serveOptions struct {
	// exe is the binary; "" runs this test binary as the daemon.
	exe string
	// env is added to the environment.
	env []string
	// moved hears of a listener startServe moved to a new port (key is its
	// config key: server.listen, server.metrics_listen or mqtt.listen),
	// once the config says so and before the daemon starts again. What
	// else knew the old address follows here (a platform that registered
	// a hub under it, a proxy in front of it).
	moved func(key, from, to string)
}

// startDaemon runs serve on the config at cfg, this test binary playing
// the daemon, and returns once it is ready (see startServe).
func startDaemon(t testing.TB, cfg string) *daemonProcess {
	t.Helper()
	return startServe(t, cfg, serveOptions{})
}

// served holds the configs a daemon became ready on.
var served sync.Map

// startServe runs serve on the config at cfg and returns once the daemon
// logged that it is ready, which it does after binding every listener; a
// process that only accepted connections could be another one, on a port
// it took. The daemon is killed when the test ends.
//
// A port picked free can be taken by another process before the daemon
// binds it; the daemon then exits with "address already in use". On the
// first start on cfg, the listener is moved to a new free port in the
// config and the daemon started again, up to porttest.Attempts starts,
// each logged; o.moved follows. A restart keeps its API and MQTT ports,
// which clients hold: it tries them again a few times, and moves only the
// metrics port.
func startServe(t testing.TB, cfg string, o serveOptions) *daemonProcess {
	t.Helper()
	skipIfEmulated(t)
	_, restart := served.Load(cfg)
	for attempt := 1; ; attempt++ {
		p := runServe(t, cfg, o)
		err := p.waitReady(20 * time.Second)
		if err == nil {
			served.Store(cfg, true)
			return p
		}
		key, taken := takenListener(p.stderr.String())
		if taken == "" || attempt == porttest.Attempts {
			t.Fatalf("serve on %s did not become ready: %v\n%s", cfg, err, p.stderr)
		}
		if restart && key != "server.metrics_listen" {
			t.Logf("serve could not listen on %s (%s): another process took the port while the daemon was down; clients know the daemon there, so it starts there again (start %d of at most %d)",
				taken, key, attempt+1, porttest.Attempts)
			time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
			continue
		}
		to := freePort(t)
		moveListener(t, cfg, taken, to)
		when := "after it was picked"
		if restart {
			when = "while the daemon was down"
		}
		t.Logf("serve could not listen on %s (%s): another process took the port %s; %s now says %s, starting it again (start %d of at most %d)",
			taken, key, when, cfg, to, attempt+1, porttest.Attempts)
		if o.moved != nil {
			o.moved(key, taken, to)
		}
	}
}

// runServe starts one daemon process on cfg.
func runServe(t testing.TB, cfg string, o serveOptions) *daemonProcess {
	t.Helper()
	exe := o.exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(exe, "serve", "--config", cfg)
	cmd.Env = append(append(os.Environ(), "SWITCHBRIDGE_RUN_MAIN=1"), o.env...)
	// The log is scanned for the tests' secrets when the test ends, after
	// the process is killed (the Cleanup below runs first).
	p := &daemonProcess{cmd: cmd, stderr: logtest.Watched(t, "serve --config "+cfg+" (its log or metrics)"), done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.scrapeMetrics()
		cmd.Process.Kill()
		<-p.done
	})
	return p
}

// scrapeMetrics adds the metrics of a daemon still running to its log, for
// the scan.
func (p *daemonProcess) scrapeMetrics() {
	select {
	case <-p.done:
		return
	default:
	}
	if p.metrics == "" || p.metrics == "off" {
		return
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + p.metrics + "/metrics")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	io.Copy(p.stderr, resp.Body)
}

// waitReady waits until the daemon logs that it is ready, and notes where
// it listens; an error when it exits first or takes longer than within.
func (p *daemonProcess) waitReady(within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		if addr, metrics, ok := readyAddrs(p.stderr.String()); ok {
			p.addr, p.metrics = addr, metrics
			return nil
		}
		select {
		case <-p.done:
			// Wait has copied all of stderr: the ready line, had it
			// come just before the exit, is there now.
			if addr, metrics, ok := readyAddrs(p.stderr.String()); ok {
				p.addr, p.metrics = addr, metrics
				return nil
			}
			return fmt.Errorf("exited before it was ready: %v", p.err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %s", within)
		}
	}
}

// The ready line's listen and metrics_listen, in the text log format and
// in JSON.
var (
	readyListenRE  = regexp.MustCompile(`(?:^|[\s{,])"?listen"?[=:]"?([^\s",}]+)`)
	readyMetricsRE = regexp.MustCompile(`(?:^|[\s{,])"?metrics_listen"?[=:]"?([^\s",}]+)`)
)

// readyAddrs finds the daemon's "switchbridge ready" line in log and
// returns the addresses it names.
func readyAddrs(log string) (addr, metrics string, ok bool) {
	for line := range strings.Lines(log) {
		if !strings.Contains(line, "switchbridge ready") {
			continue
		}
		l, m := readyListenRE.FindStringSubmatch(line), readyMetricsRE.FindStringSubmatch(line)
		if l == nil || m == nil {
			return "", "", false
		}
		return l[1], m[1], true
	}
	return "", "", false
}

// bindTakenRE is serve's error for a listener whose address is in use:
// "server.listen ADDR: listen tcp ADDR: bind: address already in use",
// likewise server.metrics_listen and mqtt.listen ("mqtt.listen ADDR:
// embedded MQTT broker: listen tcp ADDR: ...").
var bindTakenRE = regexp.MustCompile(`(server\.listen|server\.metrics_listen|mqtt\.listen)\b[^\n]*?listen tcp (\S+): bind: address already in use`)

// takenListener returns the config key and address of the listener serve
// could not bind because another process holds its port; "" when that is
// not why it stopped.
func takenListener(stderr string) (key, addr string) {
	m := bindTakenRE.FindStringSubmatch(stderr)
	if m == nil {
		return "", ""
	}
	return m[1], m[2]
}

// moveListener replaces address from with to everywhere in the config at
// path (a public_url naming it too), as a whole address: 127.0.0.1:4000
// is not 127.0.0.1:40001.
func moveListener(t testing.TB, path, from, to string) {
	t.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(regexp.QuoteMeta(from) + `(\D|$)`)
	if !re.Match(body) {
		t.Fatalf("%s does not name %s, the address serve could not listen on", path, from)
	}
	body = re.ReplaceAll(body, []byte(to+"${1}"))
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
}

// listenOnAnyPort makes the config at path listen on a port the kernel
// picks as the daemon binds it (port 0), the metrics too unless off: for a
// daemon started where a second start does not fit (a signal sent at a set
// time after exec), so that no port picked in advance can be taken. The
// daemon names the ports in its ready line (readyAddrs).
func listenOnAnyPort(t testing.TB, path string) {
	t.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^(  (?:metrics_)?listen: )127\.0\.0\.1:\d+$`)
	if !re.Match(body) {
		t.Fatalf("%s has no server.listen on 127.0.0.1", path)
	}
	body = re.ReplaceAll(body, []byte("${1}127.0.0.1:0"))
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatal(err)
	}
}
