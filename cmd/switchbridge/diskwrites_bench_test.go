package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// BenchmarkDiskWrites measures what the hub writes to its SD card, as
// `make bench` prints it: the real binary (go build, as make dist builds
// it) with 50 Tasmota plugs (simulated in this process) on its embedded
// broker, its data directory on this machine's disk, and the bytes it
// caused to be written read from /proc/PID/io:
//
//   - write_bytes: what the process dirtied for the storage layer (page
//     cache pages of its files, counted once per page dirtied, so a 100
//     byte write into a clean page counts 4096): what wears the card;
//   - wchar: every byte it passed to write(2), to files, sockets and its
//     log alike; the log (to stderr, which journald writes, not the hub)
//     is taken out and shown on its own.
//
// Three phases, the first two scaled to a day:
//
//   - idle: the plugs connected and quiet, for idleFor;
//   - readings: each plug sends tele/<topic>/SENSOR with ENERGY every
//     readingEvery (1 s, ten times the firmware's fastest TelePeriod of
//     10 s, so that 20 s here are 200 s of plugs reporting every 10 s),
//     bytes per report; and the energy records' writes, measured alone: a
//     counter reset is written at once, so resets one after the other
//     give the cost of a write of one record, and 50 at once that of one
//     write of 50. A switch's record is written at most once every 10
//     minutes while it reports, every record falling due on the same
//     10-minute boundaries, so a day of 50 plugs reporting every 10 s is
//     50 × 8,640 reports and 144 writes of 50 records (and a write of one
//     record for each counter reset);
//   - commands: commands through the API (PUT /switches/<id>/on|off, the
//     plug answering on the broker), bytes per command.
//
// Measured on 2026-11-28 on the shared 2-vCPU VM of the other benchmarks
// (ext4 on a virtio disk): see systemd/README.md ("What the hub writes to
// its SD card") for the figures.
func BenchmarkDiskWrites(b *testing.B) {
	skipIfEmulated(b)
	const (
		plugs        = 50
		idleFor      = 20 * time.Second
		readingEvery = time.Second
		rounds       = 20
		resetPlugs   = 10
		commands     = 500
		day          = 24 * time.Hour
	)
	dir := b.TempDir()
	exe := filepath.Join(dir, "switchbridge")
	goBuild(b, exe, []string{"CGO_ENABLED=0"}, "-trimpath", "-ldflags=-s -w")

	listen := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(b))
	mqttAddr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(b))
	cfg := filepath.Join(dir, "config.yaml")
	var c strings.Builder
	fmt.Fprintf(&c, "server:\n  listen: %s\n  metrics_listen: \"off\"\n  rate_limit: {requests: 1000000, per: 24h}\ndata_dir: %s\nlog: {level: info}\n", listen, filepath.Join(dir, "data"))
	fmt.Fprintf(&c, "mqtt:\n  broker: embedded\n  listen: %s\nlocations:\n  - id: 1\n    name: Home\n    switches:\n", mqttAddr)
	for i := range plugs {
		fmt.Fprintf(&c, "      - {id: plug%03d, name: PLUG%03d, driver: mqtt, profile: tasmota, topic: plug_%03d}\n", i, i, i)
	}
	if err := os.WriteFile(cfg, []byte(c.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	endpoint, token := diskBenchInstallation(b, cfg, "plug000")

	hub := exec.Command(exe, "serve", "--config", cfg)
	var log lockedBuffer // a pipe, as to journald: in wchar, not in write_bytes
	hub.Stderr = &log
	if err := hub.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { hub.Process.Kill(); hub.Wait() })
	waitListening(b, listen)
	waitListening(b, mqttAddr)
	sims := make([]*mqtttest.Tasmota, plugs)
	for i := range sims {
		sims[i] = mqtttest.NewTasmota(b, "tcp://"+mqttAddr, mqtttest.TasmotaOptions{Topic: fmt.Sprintf("plug_%03d", i)})
	}
	pid := hub.Process.Pid
	total := make([]float64, plugs) // each plug's counter, kWh
	report := func() {
		for i, s := range sims {
			total[i] += 0.0003 // 100 W for 10 s
			s.Sensor(100, 230, 0.43, total[i])
		}
	}
	report() // the first readings, and the records they may make
	time.Sleep(3 * time.Second)

	type phase struct {
		name            string
		n               float64 // reports, writes or commands; 0 for idle
		writes, wchar   float64
		log             float64
		perDay, perDay2 float64
	}
	var phases []phase
	measure := func(name string, n float64, wait time.Duration, work func()) phase {
		from, fromLog := procIO(b, pid), log.Len()
		work()
		time.Sleep(wait) // the trailing work
		to, toLog := procIO(b, pid), log.Len()
		p := phase{name: name, n: n, writes: float64(to.writeBytes - from.writeBytes), log: float64(toLog - fromLog)}
		p.wchar = float64(to.wchar-from.wchar) - p.log
		return p
	}
	for b.Loop() {
		phases = phases[:0]
		idle := measure("idle", 0, 0, func() { time.Sleep(idleFor) })
		idle.perDay = idle.writes * float64(day/idleFor)
		idle.perDay2 = idle.wchar * float64(day/idleFor)
		phases = append(phases, idle)

		readings := measure("readings", plugs*rounds, time.Second, func() {
			for range rounds {
				start := time.Now()
				report()
				time.Sleep(readingEvery - time.Since(start))
			}
		})
		// A reset is written at once (the keeper's kick), so resets one at a
		// time, further apart than a write takes, are writes of one record;
		// all 50 at once, one write of 50.
		one := measure("1-record write", resetPlugs, time.Second, func() {
			for i := range resetPlugs {
				total[i] = 0.0001 // the plug rebooted: its counter starts again
				sims[i].Sensor(100, 230, 0.43, total[i])
				time.Sleep(500 * time.Millisecond)
			}
		})
		batch := measure("50-record write", 1, 2*time.Second, func() {
			for i := range sims {
				total[i] = 0.00005
				sims[i].Sensor(100, 230, 0.43, total[i])
			}
		})
		// Every record falls due on the same 10-minute boundaries, and the
		// keeper writes the records due together: 50 plugs reporting make
		// one write of 50 every 10 minutes (144 a day).
		reportsPerDay := float64(plugs) * float64(day/(10*time.Second))
		const writesPerDay = 144
		readings.perDay = readings.writes/readings.n*reportsPerDay + batch.writes*writesPerDay
		readings.perDay2 = readings.wchar/readings.n*reportsPerDay + batch.wchar*writesPerDay
		phases = append(phases, readings, one, batch)

		client := &http.Client{Timeout: 10 * time.Second}
		cmds := measure("commands", commands, time.Second, func() {
			for i := range commands {
				cmd := "on"
				if i%2 == 1 {
					cmd = "off"
				}
				req, _ := http.NewRequest(http.MethodPut, endpoint+"/switches/plug000/"+cmd, nil)
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					b.Fatalf("PUT %s = %d\n%s", cmd, resp.StatusCode, log.String())
				}
			}
		})
		phases = append(phases, cmds)
	}

	fmt.Printf("\ndisk writes, %d Tasmota plugs on the embedded broker, from /proc/PID/io (write_bytes: dirtied for the disk; wchar: written by write(2) to files and sockets, the log apart):\n", plugs)
	fmt.Printf("| %-15s | %8s | %14s | %14s | %12s | %17s | %17s |\n", "phase", "n", "write_bytes", "wchar", "log bytes", "write_bytes/day", "wchar/day")
	for _, p := range phases {
		per := func(v float64) string {
			if p.n == 0 {
				return fmt.Sprintf("%.0f", v)
			}
			return fmt.Sprintf("%.0f (%.1f/1)", v, v/p.n)
		}
		day := func(v float64) string {
			if p.name == "idle" || p.name == "readings" {
				return fmt.Sprintf("%.0f", v)
			}
			return "–"
		}
		fmt.Printf("| %-15s | %8.0f | %14s | %14s | %12s | %17s | %17s |\n", p.name, p.n, per(p.writes), per(p.wchar), per(p.log), day(p.perDay), day(p.perDay2))
	}
	fmt.Printf("idle: %s of quiet, scaled to a day; readings: %d reports at one a second per plug, scaled to a day of %d plugs reporting every 10 s (%.0f reports) and their records written together every 10 minutes (144 writes of 50 records); a counter reset adds a write of one record\n",
		idleFor, plugs*rounds, plugs, float64(plugs)*float64(day/(10*time.Second)))
	idle, readings, cmds := phases[0], phases[1], phases[4]
	b.ReportMetric(idle.perDay, "idle-write-B/day")
	b.ReportMetric(readings.perDay, "50-plugs-write-B/day")
	b.ReportMetric(cmds.writes/cmds.n, "write-B/command")
	hub.Process.Signal(syscall.SIGTERM)
}

// diskBenchInstallation gives the hub of cfg a user, an app and an
// installation of the switch id, and returns its endpoint and token.
func diskBenchInstallation(b *testing.B, cfg, id string) (endpoint, token string) {
	b.Helper()
	admin := func(stdin string, args ...string) string {
		var out, errb bytes.Buffer
		if code := run(context.Background(), append(args, "--config", cfg), strings.NewReader(stdin), &out, &errb, nil); code != 0 {
			b.Fatalf("%v: %s", args, errb.String())
		}
		return out.String()
	}
	admin("pw-bench\n", "user", "add", "bench", "--location", "1")
	var app struct {
		ID string `json:"client_id"`
	}
	json.Unmarshal([]byte(admin("", "app", "create", "--name", "Bench", "--redirect-uri", "https://bench.example/cb", "--owner", "bench", "--json")), &app)
	var inst struct{ Token, Endpoint string }
	json.Unmarshal([]byte(admin("", "install", "--client-id", app.ID, "--user", "bench", "--location", "1", "--switch", id, "--json")), &inst)
	if inst.Token == "" || inst.Endpoint == "" {
		b.Fatalf("no installation of %s", id)
	}
	return inst.Endpoint, inst.Token
}

// ioCounters are the fields of /proc/PID/io the benchmark reads.
type ioCounters struct{ wchar, writeBytes int64 }

func procIO(b *testing.B, pid int) ioCounters {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		b.Fatal(err)
	}
	var c ioCounters
	var seen int
	for _, line := range strings.Split(string(raw), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "wchar":
			c.wchar, seen = n, seen+1
		case "write_bytes":
			c.writeBytes, seen = n, seen+1
		}
	}
	if seen != 2 {
		b.Fatalf("no wchar or write_bytes in /proc/%d/io:\n%s", pid, raw)
	}
	return c
}

// lockedBuffer is a bytes.Buffer a process's output is copied into while
// the benchmark reads its length.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Len()
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
