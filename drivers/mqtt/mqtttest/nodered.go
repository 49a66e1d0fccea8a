package mqtttest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/infra/porttest"
)

// Node-RED is a reference for benchmarks only: the flow a user would draw
// to switch N Tasmota plugs from one HTTP call and wait for each. It is
// installed with npm, so nothing in the unit suite uses it.

// nodeREDVersion is what InstallNodeRED asks npm for.
const nodeREDVersion = "node-red@4"

// Bounds on the external processes.
const (
	nodeREDInstallTimeout = 5 * time.Minute
	nodeREDStartTimeout   = 60 * time.Second
)

// InstallNodeRED installs Node-RED with npm into dir (a temporary
// directory) and returns the path of its red.js, or "" and why it cannot:
// node or npm missing, or the install failing. NODE_RED_DIR, when set,
// names a directory where Node-RED is installed already
// (NODE_RED_DIR/node_modules/node-red/red.js), so a rerun needs no registry.
func InstallNodeRED(tb testing.TB, dir string) (redJS, why string) {
	tb.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		return "", "node is not installed (apt-get install nodejs npm)"
	}
	if d := os.Getenv("NODE_RED_DIR"); d != "" {
		dir = d
	}
	redJS = filepath.Join(dir, "node_modules", "node-red", "red.js")
	if _, err := os.Stat(redJS); err == nil {
		return redJS, ""
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", "npm is not installed (apt-get install npm)"
	}
	ctx, cancel := context.WithTimeout(context.Background(), nodeREDInstallTimeout)
	defer cancel()
	// No install scripts and no optional (native) dependencies: Node-RED
	// runs without them, and nothing is built or fetched beyond packages.
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", dir, "--no-audit", "--no-fund",
		"--omit=optional", "--ignore-scripts", "--loglevel=error", nodeREDVersion)
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Sprintf("npm install %s: %v: %s", nodeREDVersion, err, lastLines(string(out), 5))
	}
	if _, err := os.Stat(redJS); err != nil {
		return "", fmt.Sprintf("npm install %s left no %s", nodeREDVersion, redJS)
	}
	return redJS, ""
}

// NodeREDVersion is the version of the Node-RED at redJS, or "?".
func NodeREDVersion(redJS string) string {
	b, err := os.ReadFile(filepath.Join(filepath.Dir(redJS), "package.json"))
	var p struct{ Version string }
	if err != nil || json.Unmarshal(b, &p) != nil || p.Version == "" {
		return "?"
	}
	return p.Version
}

// StartNodeRED runs the Node-RED at redJS with a flow that does what
// BareHTTP does (nodeREDFlow): http in (PUT /switches/:cmd) → one function
// that sends one POWER message per plug to mqtt out (QoS 0) and keeps the
// request until each plug's stat/<topic>/POWER (one mqtt in on
// stat/+/POWER, QoS 0, a plain string) has confirmed → http response
// (204). It listens on a free loopback port, talks only to
// broker, has no editor, admin API, palette manager, telemetry or update
// check, keeps its user directory in a temporary directory, and is killed
// when the test ends. It returns the base URL once the broker connection
// is up; the flow's subscriptions may need a moment more (a warm-up
// request covers it).
func StartNodeRED(tb testing.TB, redJS, broker string, topics []string) string {
	tb.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		tb.Fatal(err)
	}
	bu, err := url.Parse(broker)
	if err != nil {
		tb.Fatal(err)
	}
	bhost, bport, err := net.SplitHostPort(bu.Host)
	if err != nil {
		tb.Fatal(err)
	}
	userDir := tb.TempDir()
	flows, err := json.MarshalIndent(nodeREDFlow(bhost, bport, topics), "", " ")
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(userDir, "flows.json"), flows, 0o600); err != nil {
		tb.Fatal(err)
	}
	// The port is picked free, but another process may take it before
	// Node-RED binds it; Node-RED then exits ("port in use") and is
	// started again on another.
	for attempt := 1; ; attempt++ {
		port := FreePort(tb)
		base, log, exited := runNodeRED(tb, node, redJS, userDir, port)
		if base != "" {
			return base
		}
		if exited && porttest.InUse(log) && attempt < porttest.Attempts {
			tb.Logf("Node-RED could not listen on 127.0.0.1:%d: another process took the port after it was picked; starting it again on another port (start %d of at most %d)",
				port, attempt+1, porttest.Attempts)
			continue
		}
		tb.Fatalf("Node-RED did not connect to %s (it exited, or took longer than %s):\n%s", broker, nodeREDStartTimeout, log)
	}
}

// runNodeRED starts Node-RED once, its HTTP side on port, and returns its
// base URL once its broker connection is up; else "", the end of its log,
// and whether it exited. It is killed when the test ends.
func runNodeRED(tb testing.TB, node, redJS, userDir string, port int) (base, lastLog string, exitedEarly bool) {
	tb.Helper()
	settings := fmt.Sprintf(`// generated for one benchmark: loopback only, nothing fetched
module.exports = {
    uiHost: "127.0.0.1",
    uiPort: %d,
    userDir: %q,
    flowFile: "flows.json",
    credentialSecret: false,
    httpAdminRoot: false,
    disableEditor: true,
    diagnostics: { enabled: false, ui: false },
    runtimeState: { enabled: false, ui: false },
    telemetry: { enabled: false, updateNotification: false },
    externalModules: {
        autoInstall: false,
        palette: { allowInstall: false, allowUpdate: false, allowUpload: false },
        modules: { allowInstall: false }
    },
    editorTheme: { tours: false, projects: { enabled: false }, palette: {} },
    logging: { console: { level: "info", metrics: false, audit: false } }
};
`, port, userDir)
	if err := os.WriteFile(filepath.Join(userDir, "settings.js"), []byte(settings), 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(node, redJS, "--userDir", userDir, "--settings", filepath.Join(userDir, "settings.js"))
	cmd.Dir = userDir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	var (
		mu  sync.Mutex
		log strings.Builder
	)
	connected := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		var once sync.Once
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			mu.Lock()
			if log.Len() < 64<<10 {
				log.WriteString(line + "\n")
			}
			mu.Unlock()
			if strings.Contains(line, "Connected to broker") {
				once.Do(func() { close(connected) })
			}
		}
		cmd.Wait()
	}()
	tb.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		if tb.Failed() {
			mu.Lock()
			tb.Logf("Node-RED's log:\n%s", lastLines(log.String(), 30))
			mu.Unlock()
		}
	})
	t := time.NewTimer(nodeREDStartTimeout)
	defer t.Stop()
	select {
	case <-connected:
		return fmt.Sprintf("http://127.0.0.1:%d", port), "", false
	case <-exited:
		exitedEarly = true
	case <-t.C:
	}
	mu.Lock()
	defer mu.Unlock()
	return "", lastLines(log.String(), 20), exitedEarly
}

// nodeREDFlow is the flow StartNodeRED deploys, as Node-RED's flows.json:
// the flow a skilled Node-RED user draws for this job. One http in; one
// function node that both fans the command out and tracks the pending
// request (the plugs still to confirm, in its node context); one mqtt out
// at QoS 0; one mqtt in on the wildcard stat/+/POWER at QoS 0 as a plain
// string (Tasmota's plain report, so nothing is parsed as JSON); http
// response.
func nodeREDFlow(host, port string, topics []string) []map[string]any {
	ts, _ := json.Marshal(topics)
	track := `// From http in: a command to fan out. From mqtt in: a plug's report.
if (msg.req) {
    const cmd = msg.req.params.cmd;
    if (cmd !== "on" && cmd !== "off") {
        msg.statusCode = 404;
        msg.payload = "unknown command";
        return [null, msg];
    }
    const want = cmd.toUpperCase();
    const waiting = new Set();
    const out = [];
    for (const t of TOPICS) {
        waiting.add("stat/" + t + "/POWER");
        out.push({ topic: "cmnd/" + t + "/POWER", payload: want });
    }
    context.set("pending", { req: msg.req, res: msg.res, want: want, waiting: waiting });
    return [out, null];
}
const p = context.get("pending");
if (!p || msg.payload !== p.want || !p.waiting.delete(msg.topic) || p.waiting.size > 0) {
    return null;
}
context.set("pending", undefined);
return [null, { req: p.req, res: p.res, statusCode: 204, payload: "" }];`
	track = strings.Replace(track, "TOPICS", string(ts), 1)
	nodes := []map[string]any{
		{"id": "tab", "type": "tab", "label": "fan-out"},
		{"id": "broker", "type": "mqtt-broker", "name": "mosquitto", "broker": host, "port": port,
			"clientid": "bench-nodered", "autoConnect": true, "usetls": false, "protocolVersion": "4",
			"keepalive": "60", "cleansession": true, "autoUnsubscribe": true},
		{"id": "in", "type": "http in", "z": "tab", "name": "PUT", "url": "/switches/:cmd", "method": "put",
			"upload": false, "wires": []any{[]any{"track"}}},
		{"id": "track", "type": "function", "z": "tab", "name": "fan out, track", "func": track, "outputs": 2,
			"wires": []any{[]any{"out"}, []any{"resp"}}},
		{"id": "out", "type": "mqtt out", "z": "tab", "name": "", "topic": "", "qos": "0", "retain": "false",
			"broker": "broker", "wires": []any{}},
		{"id": "stat", "type": "mqtt in", "z": "tab", "name": "", "topic": "stat/+/POWER", "qos": "0",
			"datatype": "utf8", "broker": "broker", "nl": false, "rap": true, "rh": 0, "inputs": 0,
			"wires": []any{[]any{"track"}}},
		{"id": "resp", "type": "http response", "z": "tab", "name": "", "statusCode": "", "headers": map[string]any{},
			"wires": []any{}},
	}
	// Node-RED takes a node without a position for a config node.
	for i, n := range nodes {
		if _, ok := n["z"]; ok {
			n["x"], n["y"] = 100+150*(i%6), 60+40*(i/6)
		}
	}
	return nodes
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
