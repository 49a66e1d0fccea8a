package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"time"
)

// refuseTransferEncoding answers 400 to a request with a Transfer-Encoding
// and closes its connection. net/http accepts Content-Length together with
// Transfer-Encoding (the chunked body wins), which a proxy in front may
// read the other way: the request smuggling RFC 9112 §6.1 says to treat as
// an error. Go drops the Content-Length before a handler can see both, so
// every transfer-coded request is refused: the hub's requests are small
// forms and bodiless calls, which every client sends with a Content-Length.
func refuseTransferEncoding(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TransferEncoding) > 0 {
			w.Header().Set("Connection", "close")
			http.Error(w, "Transfer-Encoding is not accepted: send the body with a Content-Length", http.StatusBadRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// strictTransportSecurity tells browsers to reach the hub over HTTPS only,
// for maxAge (RFC 6797), on every answer of the TLS listener: a browser
// that was once on the hub's https address then never sends the login
// form or its cookies over plain HTTP, even when a neighbour on the LAN
// redirects it there. Without includeSubDomains: the hub speaks for its
// own host name only, not for the other hosts of a home domain.
func strictTransportSecurity(next http.Handler, maxAge time.Duration) http.Handler {
	v := fmt.Sprintf("max-age=%d", int64(maxAge/time.Second))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", v)
		next.ServeHTTP(w, r)
	})
}

// Serve serves HTTP until ctx is done, then shuts down gracefully: it stops
// accepting, lets requests in flight finish within the config's shutdown
// timeout, and returns. It returns a non-nil error only when serving failed.
func (d *Daemon) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	if d.server.TLSConfig != nil {
		// The certificate comes from TLSConfig.GetCertificate, not files.
		go func() { errc <- d.server.ServeTLS(d.ln, "", "") }()
	} else {
		go func() { errc <- d.server.Serve(d.ln) }()
	}
	merrc := make(chan error, 1)
	if d.metricsServer != nil {
		go func() { merrc <- d.metricsServer.Serve(d.metricsLn) }()
	}
	go settle(ctx)
	select {
	case err := <-errc:
		if d.metricsServer != nil {
			d.metricsServer.Close()
		}
		return err
	case err := <-merrc:
		d.server.Close()
		return fmt.Errorf("metrics listener: %w", err)
	case <-ctx.Done():
	}
	d.logger.Info("shutting down: finishing requests in flight", "timeout_seconds", d.Config.Server.ShutdownTimeout.Std().Seconds())
	if d.Platform != nil {
		// Hubs' long polls would outlast the shutdown timeout: they end
		// now, with an answer that has the hubs call again in a second.
		d.Platform.Shutdown()
	}
	// A fresh timeout, not the cancelled ctx: requests in flight get their time.
	sctx, cancel := context.WithTimeout(context.Background(), d.Config.Server.ShutdownTimeout.Std())
	defer cancel()
	if d.metricsServer != nil {
		go d.metricsServer.Shutdown(sctx)
	}
	err := d.server.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	if err != nil {
		d.server.Close()
		return fmt.Errorf("shutting down: requests still running after %s: %w", d.Config.Server.ShutdownTimeout.Std(), err)
	}
	return nil
}

// settleAfter is how long after it starts serving the hub hands back the
// memory its start-up used: by then the drivers have connected and the
// devices' first reports are in.
const settleAfter = time.Second

// settle returns the heap that start-up (the config, the migrations, the
// drivers' first reports) left behind to the system, once: the runtime
// would keep most of it for minutes, and on a Pi Zero's 512 MB an idle hub
// should hold only what it uses. About 3 MB of the idle RSS with 100
// switches (BenchmarkFootprint); the collection it forces takes a
// millisecond or two, after READY=1.
func settle(ctx context.Context) {
	t := time.NewTimer(settleAfter)
	defer t.Stop()
	select {
	case <-t.C:
		debug.FreeOSMemory()
	case <-ctx.Done():
	}
}
