package porttest_test

import (
	"net"
	"strconv"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/infra/porttest"
)

// Lines as each server writes them when its port is taken, and lines of
// theirs that say something else.
func TestInUse(t *testing.T) {
	for _, c := range []struct {
		out  string
		want bool
	}{
		{"switchbridge: server.metrics_listen 127.0.0.1:41237: listen tcp 127.0.0.1:41237: bind: address already in use", true},
		{"1795638885: Error: Address already in use", true},
		{`2026-11-25 20:00:00.000 UTC [123] LOG:  could not bind IPv4 address "127.0.0.1": Address already in use`, true},
		{"[error] Error: port in use", true},
		{"Error: listen EADDRINUSE: address already in use 127.0.0.1:1880", true},
		{"switchbridge: server.listen 192.0.2.1:80: listen tcp 192.0.2.1:80: bind: cannot assign requested address", false},
		{`LOG:  could not bind IPv4 address "127.0.0.1": Permission denied`, false},
		{"1795638887: mosquitto version 2.0.11 running", false},
		{"", false},
	} {
		if got := porttest.InUse(c.out); got != c.want {
			t.Errorf("InUse(%q) = %v, want %v", c.out, got, c.want)
		}
	}
}

// A picked port is one nothing listens on, is never handed out twice, and
// is none of those to avoid.
func TestFree(t *testing.T) {
	seen := map[int]bool{}
	for range 200 {
		p, err := porttest.Free(1883)
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] || p == 1883 {
			t.Fatalf("port %d handed out again (or avoided)", p)
		}
		seen[p] = true
	}
	p, err := porttest.Free()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		t.Fatalf("the port picked cannot be listened on: %v", err)
	}
	l.Close()
}
