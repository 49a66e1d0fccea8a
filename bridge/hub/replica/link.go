package replica

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// Link is the link role of a hub whose config has a platform: section:
// the follower that keeps the replica of the platform, the token check
// over that replica, and the reports of when each installation was used
// (for the platform's connected apps page).
type Link struct {
	*Follower
	// Authorizer answers the installation API's token checks.
	Authorizer *Authorizer

	usage  *store.UsageWriter
	prune  func(ctx context.Context, now time.Time) error
	logger *slog.Logger
}

// Options is what a hub's link is built with.
type Options struct {
	// PlatformURL, HubID and Secret are the platform's address and this
	// hub's credentials (switchbridge hub add).
	PlatformURL, HubID, Secret string
	// Store keeps the replica; Source is the replica as the token check
	// reads it.
	Store  Store
	Source Source
	// Inventory returns the hub's locations and switches as they are now.
	Inventory func() []bridge.RemoteLocation
	// PruneReplica, when set, drops expired tokens from the replica; Run
	// calls it every hour.
	PruneReplica func(ctx context.Context, now time.Time) error
	// Metrics, when set, gets the link's metrics.
	Metrics prometheus.Registerer
	Logger  *slog.Logger
}

// Open builds the link; Run runs it.
func Open(o Options) (*Link, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Link{prune: o.PruneReplica, logger: o.Logger}
	f, err := NewFollower(o.PlatformURL, o.HubID, o.Secret, o.Store, o.Logger, FollowerOptions{
		Inventory: o.Inventory,
		// The token check forgets what it knew after every batch; the
		// follower applies none before Run, when Authorizer is set.
		Applied: func() { l.Authorizer.Forget() },
	})
	if err != nil {
		return nil, err
	}
	l.Follower = f
	// The platform keeps when each installation was last used: a hub
	// reports the uses of its tokens there, written behind the requests.
	l.usage = store.NewUsageWriter(f, o.Logger.With("component", "usage"))
	l.Authorizer = NewAuthorizer(o.Source, AuthorizerOptions{Sync: f.SyncNow, Settled: f.Settled, Used: l.usage.Touch})
	if o.Metrics != nil {
		if err := f.Register(o.Metrics); err != nil {
			l.usage.Close()
			return nil, err
		}
	}
	return l, nil
}

// Run follows the platform and keeps the replica bounded until ctx ends.
func (l *Link) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Follower.Run(ctx)
	}()
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if l.prune != nil {
			if err := l.prune(ctx, time.Now()); err != nil && ctx.Err() == nil {
				l.logger.Warn("pruning expired tokens from the replica", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			<-done
			return
		case <-t.C:
		}
	}
}

// Close writes the uses not reported yet where they go.
func (l *Link) Close() error { return l.usage.Close() }
