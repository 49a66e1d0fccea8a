// Command switchbridge is the hub daemon and its administration commands:
// serve, user, app, install, installation, hub, backup, migrate-storage
// and check-config.
// main only installs the signal handling and exits with run's code, so
// tests run the whole program in-process.
//
// One file per command group: run.go dispatches and parses flags;
// serve.go, checkconfig.go, users.go, apps.go, installations.go, hub.go,
// backup.go and migratestorage.go hold the commands; config.go loads the
// config and the store they share.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/switchbridge/switchbridge/cmd/switchbridge/internal/earlysig"
)

func main() {
	// First thing: a reload asked for while the daemon starts must wait
	// for it, not end it. Go's default for SIGHUP is to exit, and systemd
	// counts a death by SIGHUP as a clean exit, so Restart=on-failure
	// would leave the hub down. earlysig has caught SIGHUP since before
	// the heavy packages' initialisation; take over from it here.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGTERM, os.Interrupt)
	early := earlysig.Handover()
	serving := len(os.Args) > 1 && os.Args[1] == "serve"
	ctx, cancel := context.WithCancel(context.Background())
	hangup := newReloadRequests()
	go relaySignals(sigs, early, serving, cancel, hangup)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, hangup)
	signal.Stop(sigs)
	cancel()
	os.Exit(code)
}
