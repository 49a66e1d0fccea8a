// Command switchbridge is the hub daemon and its administration commands:
// serve, user, app, install and check-config. main only maps run's error to
// an exit code, so tests run the whole program in-process.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
