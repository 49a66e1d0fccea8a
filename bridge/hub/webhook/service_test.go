package webhook_test

import (
	"context"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/hub/webhook"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// countingStore is the real store, counting how often the outbox is read.
type countingStore struct {
	*hubstore.Store
	reads atomic.Int64
}

func (c *countingStore) DueWebhookDeliveries(ctx context.Context, now time.Time, limit int) ([]bridge.WebhookDelivery, error) {
	c.reads.Add(1)
	return c.Store.DueWebhookDeliveries(ctx, now, limit)
}

// A hub without webhooks does not read the outbox for every change of a
// switch, nor several times a second while idle: on a Pi that would be
// CPU spent on nothing, all day.
func TestIdleOutboxIsNotPolled(t *testing.T) {
	db, err := store.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := &countingStore{Store: hubstore.New(db)}
	feed := bridge.NewFeed(bridge.FeedOptions{})
	feed.Started()
	svc := webhook.New(st, accounts.New(db), feed, nil, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { svc.Run(ctx, nil); close(done) }()
	defer func() { cancel(); <-done }()

	time.Sleep(100 * time.Millisecond)
	before := st.reads.Load()
	// 200 changes of a switch no webhook wants, over a second.
	for i := range 200 {
		v := bridge.On
		if i%2 == 1 {
			v = bridge.Off
		}
		feed.Notify("lamp", bridge.State{Value: v, Available: true, Updated: time.Now()})
		time.Sleep(5 * time.Millisecond)
	}
	if n := st.reads.Load() - before; n > 2 {
		t.Errorf("the outbox was read %d times during 200 changes no webhook wants and about a second idle", n)
	}
}
