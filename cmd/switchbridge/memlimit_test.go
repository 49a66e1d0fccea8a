package main

import (
	"runtime/debug"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/config"
)

// TestMemoryLimit checks that serve's memory limit reaches the Go runtime:
// server.memory_limit when GOMEMLIMIT is not set, GOMEMLIMIT's when it is.
func TestMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })

	t.Setenv("GOMEMLIMIT", "")
	cfg, err := config.Load("x.yaml", config.Text("server: {memory_limit: 96MiB}\nlocations: [{id: 1, name: Home, switches: [{id: a, name: A, driver: virtual}]}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	limit, from := applyMemoryLimit(cfg)
	if got := debug.SetMemoryLimit(-1); got != 96<<20 || limit != 96<<20 || from != "server.memory_limit" {
		t.Errorf("runtime limit %d, reported %s from %s; want 96MiB from server.memory_limit", got, limit, from)
	}

	// The default, for a 512 MB Pi.
	cfg, _ = config.Load("x.yaml", config.Text("locations: [{id: 1, name: Home, switches: [{id: a, name: A, driver: virtual}]}]\n"))
	applyMemoryLimit(cfg)
	if got := debug.SetMemoryLimit(-1); got != config.DefaultMemoryLimit {
		t.Errorf("default runtime limit %d, want %d", got, config.DefaultMemoryLimit)
	}

	// The runtime read GOMEMLIMIT at start; serve leaves it alone.
	t.Setenv("GOMEMLIMIT", "200MiB")
	debug.SetMemoryLimit(200 << 20)
	limit, from = applyMemoryLimit(cfg)
	if got := debug.SetMemoryLimit(-1); got != 200<<20 || limit != 200<<20 || from != "GOMEMLIMIT" {
		t.Errorf("with GOMEMLIMIT: runtime limit %d, reported %s from %s; want 200MiB from GOMEMLIMIT", got, limit, from)
	}
}
