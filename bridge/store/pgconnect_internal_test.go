package store

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// A server that accepts connections and never answers: the start fails
// once the connect timeout is over, saying so, rather than hang.
func TestOpenPostgresGivesUpOnASilentServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	old := postgresConnectTimeout
	postgresConnectTimeout = 300 * time.Millisecond
	defer func() { postgresConnectTimeout = old }()

	done := make(chan error, 1)
	go func() {
		db, err := OpenPostgres(context.Background(), "postgres://app:s3cret-pw@"+ln.Addr().String()+"/switchbridge?sslmode=disable")
		if err == nil {
			db.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "no answer from the server at "+ln.Addr().String()+" within 300ms") {
			t.Errorf("silent server: %v", err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("the error quotes the password: %v", err)
		}
	case <-time.After(old):
		t.Fatalf("still connecting after %v, the connect timeout being %v", old, postgresConnectTimeout)
	}
}
