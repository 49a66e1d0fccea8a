package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// BenchmarkCPUPerCommand measures what a command costs the process that
// serves it, where a Pi Zero's budget is: the CPU time (user + system, all
// threads) of the real hub (serve, as make dist builds it) and of the
// bare net/http handler (mqtttest.BareHTTPServer, run as a process of its
// own) over the same number of PUTs, each switching one Tasmota plug of
// its own fleet. The plugs, the client and the brokers run outside both
// processes and count for neither; the bare handler has a Mosquitto of
// its own, set up as the hub's, because its wildcard subscription would
// take the hub's plug's replies too. The two take turns in blocks
// (mqtttest.BenchBlock), in an order drawn every round, and the
// per-thread run time comes from /proc/PID/task/*/schedstat, in
// nanoseconds, read at the end of every round: a process's CPU per
// command counts what its commands left for later (the log buffer's
// write every 50 ms, the values' write-behind every 500 ms), whenever
// it ran. Its CPU within its own blocks alone, which leaves that out, is
// in brackets. `make bench` runs it with 2,000 commands each; the target
// is the hub at most 1.3 times the bare handler. BenchmarkCPUComponents
// splits the hub's figure by component.
func BenchmarkCPUPerCommand(b *testing.B) {
	skipIfEmulated(b)
	commands := cpuCommands
	dir := b.TempDir()
	exe := filepath.Join(dir, "switchbridge")
	goBuild(b, exe, []string{"CGO_ENABLED=0"}, "-trimpath", "-ldflags=-s -w")
	bareBroker := mqtttest.StartMosquitto(b)
	bareTopics, _, _ := mqtttest.Fleet(b, bareBroker.URL, "bare", 1)
	broker := mqtttest.StartMosquitto(b)
	_, _, hubSwitches := mqtttest.Fleet(b, broker.URL, "hub", 1)

	// The bare handler: this test binary again, serving only that, from a
	// copy of its own (ownCopy: not sharing its cached code with this
	// process's).
	barePort := mqtttest.FreePort(b)
	bare := exec.Command(ownCopy(b, os.Args[0], filepath.Join(dir, "bare-HTTP")))
	bare.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%s|127.0.0.1:%d", bareHTTPEnv, bareBroker.URL, bareTopics[0], barePort))
	var bareLog bytes.Buffer
	bare.Stderr = &bareLog
	if err := bare.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { bare.Process.Kill(); bare.Wait() })

	// The hub, with a user, an app and an installation of that plug.
	hubAddr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(b))
	cfg, endpoint, token := benchInstallation(b, filepath.Join(dir, "hub"), broker.URL, hubSwitches[0], hubAddr)
	hub := exec.Command(exe, "serve", "--config", cfg)
	logFile, err := os.Create(filepath.Join(dir, "hub.log")) // as to the journal: written, not discarded
	if err != nil {
		b.Fatal(err)
	}
	defer logFile.Close()
	hub.Stderr = logFile
	if err := hub.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { hub.Process.Kill(); hub.Wait() })

	waitListening(b, hubAddr)
	waitListening(b, fmt.Sprintf("127.0.0.1:%d", barePort))
	sides := []struct {
		name       string
		pid        int
		client     *daemontest.BareClient
		whole, own time.Duration
		n          int
	}{
		{name: "bare-HTTP", pid: bare.Process.Pid, client: daemontest.DialBare(b, fmt.Sprintf("http://127.0.0.1:%d", barePort), "")},
		{name: "hub", pid: hub.Process.Pid, client: daemontest.DialBare(b, endpoint, token)},
	}
	for _, s := range sides { // warm-up: connections, caches, the plug's state
		for i := range mqtttest.BenchBlock {
			benchPut(b, s.name, s.client, mqtttest.BenchCommand(i))
		}
	}
	time.Sleep(time.Second) // the warm-up's trailing work
	µs := func(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / 1000 / float64(n) }
	var bareCPU, hubCPU, ratio float64
	fmt.Printf("\nCPU per command, N = 1, %d commands each, µs (within its own blocks alone):\n", commands)
	for run := 1; b.Loop(); run++ {
		for i := range sides {
			sides[i].whole, sides[i].own, sides[i].n = 0, 0, 0
		}
		from := [2]time.Duration{processCPU(b, sides[0].pid), processCPU(b, sides[1].pid)}
		for r := 0; sides[0].n < commands; r++ {
			for _, k := range rand.Perm(len(sides)) {
				s := &sides[k]
				before := processCPU(b, s.pid)
				for i := range mqtttest.BenchBlock {
					benchPut(b, s.name, s.client, mqtttest.BenchCommand(i))
				}
				s.own += processCPU(b, s.pid) - before
				s.n += mqtttest.BenchBlock
			}
		}
		time.Sleep(700 * time.Millisecond) // the last commands' trailing work
		for i := range sides {
			sides[i].whole = processCPU(b, sides[i].pid) - from[i]
		}
		bareCPU, hubCPU = µs(sides[0].whole, sides[0].n), µs(sides[1].whole, sides[1].n)
		ratio = hubCPU / bareCPU
		fmt.Printf("run %d: bare-HTTP %.1f (%.1f), hub %.1f (%.1f): hub/bare %.2f (target ≤ 1.3: %s)\n",
			run, bareCPU, µs(sides[0].own, sides[0].n), hubCPU, µs(sides[1].own, sides[1].n), ratio, metIf(ratio <= 1.3))
	}
	b.ReportMetric(bareCPU, "bare-cpu-µs/cmd")
	b.ReportMetric(hubCPU, "hub-cpu-µs/cmd")
	b.ReportMetric(ratio, "hub/bare-cpu")
}

// benchInstallation writes the config of a hub that serves one switch
// (sw, a line of mqtttest.Fleet) on listen in dir, with metrics off and a
// rate limit no benchmark reaches, and gives it a user, an app and an
// installation of that switch. It returns the config file and the
// installation's endpoint and token.
func benchInstallation(b *testing.B, dir, broker, sw, listen string) (cfg, endpoint, token string) {
	b.Helper()
	return benchInstallationBy(b, "", dir, broker, sw, listen)
}

// benchInstallationBy is benchInstallation with the admin commands run by
// the switchbridge binary exe ("" for this code, in process): a
// revision's database must be made by that revision, since a binary
// refuses a schema newer than its own.
func benchInstallationBy(b *testing.B, exe, dir, broker, sw, listen string) (cfg, endpoint, token string) {
	b.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	cfg = filepath.Join(dir, "config.yaml")
	err := os.WriteFile(cfg, fmt.Appendf(nil, "server:\n  listen: %s\n  metrics_listen: \"off\"\n  rate_limit: {requests: 1000000, per: 24h}\ndata_dir: %s\nlog: {level: info}\nmqtt:\n  broker: %s\n  client_id: %s\nlocations:\n  - id: 1\n    name: Home\n    switches:\n      - {driver: mqtt, %s}\n",
		listen, filepath.Join(dir, "data"), broker, "cpu-"+filepath.Base(dir), sw), 0o600)
	if err != nil {
		b.Fatal(err)
	}
	admin := func(stdin string, args ...string) string {
		var out, errb bytes.Buffer
		args = append(args, "--config", cfg)
		if exe != "" {
			c := exec.Command(exe, args...)
			c.Stdin, c.Stdout, c.Stderr = strings.NewReader(stdin), &out, &errb
			if err := c.Run(); err != nil {
				b.Fatalf("%s %v: %v: %s", exe, args, err, errb.String())
			}
			return out.String()
		}
		if code := run(context.Background(), args, strings.NewReader(stdin), &out, &errb, nil); code != 0 {
			b.Fatalf("%v: %s", args, errb.String())
		}
		return out.String()
	}
	admin("pw-bench\n", "user", "add", "bench", "--location", "1")
	var app struct {
		ID string `json:"client_id"`
	}
	json.Unmarshal([]byte(admin("", "app", "create", "--name", "Bench", "--redirect-uri", "https://bench.example/cb", "--owner", "bench", "--json")), &app)
	_, id, _ := strings.Cut(sw, "id: ")
	id, _, _ = strings.Cut(id, ",")
	var inst struct{ Token, Endpoint string }
	json.Unmarshal([]byte(admin("", "install", "--client-id", app.ID, "--user", "bench", "--location", "1", "--switch", id, "--json")), &inst)
	if inst.Token == "" || inst.Endpoint == "" {
		b.Fatalf("no installation of %s", id)
	}
	return cfg, inst.Endpoint, inst.Token
}

// cpuCommands is how many commands each side of BenchmarkCPUPerCommand
// sends per run.
const cpuCommands = 2000

// bareHTTPEnv makes the test binary serve the bare handler alone:
// "broker|topic|listen address", and optionally "|profile file" for
// BenchmarkCPUComponents (a CPU profile from SIGUSR1 until SIGTERM).
const bareHTTPEnv = "SWITCHBRIDGE_BENCH_BARE_HTTP"

// serveBareHTTPIfAsked runs the bare handler when bareHTTPEnv asks for it,
// and reports whether it did (then the process only serves until killed,
// or until SIGTERM).
func serveBareHTTPIfAsked() bool {
	spec := os.Getenv(bareHTTPEnv)
	if spec == "" {
		return false
	}
	parts := strings.Split(spec, "|")
	if len(parts) != 3 && len(parts) != 4 {
		fmt.Fprintf(os.Stderr, "%s=%q: want broker|topic|address[|profile]\n", bareHTTPEnv, spec)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if len(parts) == 4 && parts[3] != "" {
		defer profileFromSignal(ctx, parts[3])()
	}
	f, err := mqtttest.DialFloor(parts[0], []string{parts[1]})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", parts[2])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv := mqtttest.BareHTTPServer(f)
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	fmt.Fprintln(os.Stderr, srv.Serve(ln))
	return true
}

// waitListening waits until something accepts connections on addr.
//
// The CPU benchmarks start their processes themselves, on ports picked
// with mqtttest.FreePort, rather than with startServe: what they measure
// includes how each process logs (to a file, as to the journal), the
// hub's endpoint is installed before it starts, and some sides are older
// builds or variants of the daemon. So a port another process takes
// between the pick and the bind is not moved off: the side exits
// ("address already in use" in its log), and the run fails at its first
// command (the process accepting on addr is not the side). make bench and
// make bench-components run them alone, one package at a time; rerun.
func waitListening(b *testing.B, addr string) {
	b.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.Fatalf("nothing listens on %s", addr)
}

// processCPU is the time the process pid's threads have run, from the
// scheduler's per-thread accounting (nanoseconds, unlike the clock ticks of
// /proc/PID/stat). A Go process keeps its threads, so none is lost
// between two readings.
func processCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	cpu, _ := processSched(b, pid)
	return cpu
}

// sysmonThread is the thread id of the Go runtime's monitor thread
// (sysmon) of the process pid: the runtime starts it before any other
// thread, so it is the first thread after the main one (perf record
// shows only runtime.sysmon on it). It wakes every 20 µs while any
// goroutine runs, so its cost follows how long a command keeps the
// process busy, and a CPU profile misses it (it has no CPU timer). Call
// it on a young process: thread ids wrap, start times do not.
func sysmonThread(b *testing.B, pid int) int {
	b.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		b.Fatal(err)
	}
	tid, first := 0, int64(0)
	for _, t := range tasks {
		n, err := strconv.Atoi(t.Name())
		if err != nil || n == pid {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/stat", pid, n))
		if err != nil {
			continue
		}
		// After the command's name in brackets, the start time is the
		// 20th field.
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
		if len(f) < 20 {
			continue
		}
		at, _ := strconv.ParseInt(f[19], 10, 64)
		if tid == 0 || at < first || (at == first && n < tid) {
			tid, first = n, at
		}
	}
	if tid == 0 {
		b.Fatalf("no threads of %d besides its main one", pid)
	}
	return tid
}

// threadCPU is the time thread tid of process pid has run.
func threadCPU(b *testing.B, pid, tid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/schedstat", pid, tid))
	if err != nil {
		b.Fatal(err)
	}
	ns, _ := strconv.ParseInt(strings.Fields(string(raw))[0], 10, 64)
	return time.Duration(ns)
}

// processSched is processCPU with the number of times the process's
// threads were put on a CPU (the third field of schedstat): each is a
// thread that was woken, or came back from a preemption.
func processSched(b *testing.B, pid int) (cpu time.Duration, slices int64) {
	b.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		b.Fatalf("no threads of %d: %v", pid, err)
	}
	for _, t := range tasks {
		raw, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that just ended
		}
		f := strings.Fields(string(raw))
		if len(f) < 3 {
			continue
		}
		ns, _ := strconv.ParseInt(f[0], 10, 64)
		n, _ := strconv.ParseInt(f[2], 10, 64)
		cpu += time.Duration(ns)
		slices += n
	}
	return cpu, slices
}
