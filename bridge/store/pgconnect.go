package store

// Why a platform process could not connect to PostgreSQL at start, said
// so that an operator knows what to fix: the server, the database, or the
// credentials. Nothing here quotes the DSN: it may hold a password.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// explainConnect turns the error of the first connection to the server
// cfg names into a message that says which of these it was. timedOut is
// whether the attempt ran out of postgresConnectTimeout.
func explainConnect(err error, cfg *pgx.ConnConfig, timedOut bool) error {
	where := serverName(cfg)
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe) && pe.Code == "3D000": // invalid_catalog_name
		return fmt.Errorf("postgres: the server at %s has no database %q: create it (CREATE DATABASE %s OWNER %s) or correct the DSN in storage.postgres.dsn_file",
			where, cfg.Database, pgIdent(cfg.Database), pgIdent(cfg.User))
	case errors.As(err, &pe) && strings.HasPrefix(pe.Code, "28"): // invalid_authorization_specification, invalid_password
		return fmt.Errorf("postgres: the server at %s refused user %q (a wrong password, a role that does not exist, or no pg_hba.conf rule for this host and user): %s",
			where, cfg.User, pe.Message)
	case errors.As(err, &pe):
		return fmt.Errorf("postgres: the server at %s refused the connection: %s (SQLSTATE %s)", where, pe.Message, pe.Code)
	case timedOut || pgconn.Timeout(err):
		limit := postgresConnectTimeout
		if t := cfg.ConnectTimeout; t > 0 && t < limit {
			limit = t // the DSN's connect_timeout
		}
		return fmt.Errorf("postgres: no answer from the server at %s within %v: is a PostgreSQL server listening there, and does nothing between drop the packets?", where, limit)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("postgres: connecting to %s: %w", where, context.Canceled)
	}
	return fmt.Errorf("postgres: cannot reach the server at %s: %s", where, dialReason(err))
}

// serverName is where cfg connects: host:port, or the socket directory.
func serverName(cfg *pgx.ConnConfig) string {
	if strings.HasPrefix(cfg.Host, "/") {
		return "the Unix socket in " + cfg.Host + " (port " + strconv.Itoa(int(cfg.Port)) + ")"
	}
	return net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
}

// dialReason is the innermost reason a dial failed ("connection refused",
// "no such host"), or the whole error when there is no dial error in it.
func dialReason(err error) string {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		return de.Error()
	}
	return err.Error()
}
