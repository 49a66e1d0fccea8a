package mqtt

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// embeddedBroker is the MQTT broker the hub runs in-process for
// broker: embedded, so plugs can connect straight to the hub.
type embeddedBroker struct {
	srv         *mochi.Server
	addr        string // where it listens
	dialAddr    string // where the hub's own client reaches it
	hubUser     string
	hubPassword string
}

// startEmbedded listens on listen (a bind error comes back here, before the
// hub reports ready) and serves MQTT there. users are the plugs' logins;
// with none, any client may connect (the config allows that only on
// loopback). The hub's own client logs in with a random password made here.
func startEmbedded(listen string, users map[string]string, log *slog.Logger) (*embeddedBroker, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("embedded MQTT broker: %w", err)
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		ln.Close()
		return nil, err
	}
	b := &embeddedBroker{addr: ln.Addr().String(), hubUser: "switchbridge-hub", hubPassword: hex.EncodeToString(secret)}
	b.dialAddr = b.addr
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		b.dialAddr = net.JoinHostPort("127.0.0.1", fmt.Sprint(tcp.Port))
	}

	logins := map[string]string{b.hubUser: b.hubPassword}
	for u, p := range users {
		if u != b.hubUser {
			logins[u] = p
		}
	}
	b.srv = mochi.New(&mochi.Options{
		Logger: slog.New(minLevel{log.Handler().WithAttrs([]slog.Attr{slog.String("component", "embedded-broker")}), slog.LevelWarn}),
		// The $SYS topics are of no use to plugs; publish them rarely.
		SysTopicResendInterval: 3600,
	})
	if err := b.srv.AddHook(&authHook{logins: logins, anonymous: len(users) == 0}, nil); err != nil {
		ln.Close()
		return nil, err
	}
	if err := b.srv.AddListener(listeners.NewNet("switchbridge", noDelayListener{ln})); err != nil {
		ln.Close()
		return nil, err
	}
	if err := b.srv.Serve(); err != nil {
		b.srv.Close()
		return nil, err
	}
	log.Info("embedded MQTT broker listening", "address", b.addr, "logins", len(users))
	return b, nil
}

func (b *embeddedBroker) close() { b.srv.Close() }

// noDelayListener turns Nagle's algorithm off on every accepted connection.
// Go already does so for every TCP connection it makes; doing it here keeps
// that true whatever listener sits below. With Nagle on, a plug's small
// confirmation can wait ~40 ms for the client's delayed ACK.
type noDelayListener struct{ net.Listener }

func (l noDelayListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	return c, err
}

// authHook checks logins against the configured users (constant time) and
// lets every logged-in client use every topic: the broker serves one home.
type authHook struct {
	mochi.HookBase
	logins    map[string]string
	anonymous bool
}

func (h *authHook) ID() string { return "switchbridge-auth" }

func (h *authHook) Provides(b byte) bool {
	return bytes.Contains([]byte{mochi.OnConnectAuthenticate, mochi.OnACLCheck}, []byte{b})
}

func (h *authHook) OnConnectAuthenticate(_ *mochi.Client, pk packets.Packet) bool {
	want, ok := h.logins[string(pk.Connect.Username)]
	if ok {
		return subtle.ConstantTimeCompare([]byte(want), pk.Connect.Password) == 1
	}
	// Without configured users anyone may connect, whatever login the
	// firmware sends by default (Tasmota sends DVES_USER).
	return h.anonymous
}

func (h *authHook) OnACLCheck(*mochi.Client, string, bool) bool { return true }

// minLevel drops records below a level: the broker's own info messages
// (every listener and hook it adds) would drown the hub's.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(as), m.min}
}

func (m minLevel) WithGroup(g string) slog.Handler { return minLevel{m.Handler.WithGroup(g), m.min} }
