package store_test

import (
	"context"
	"errors"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/bridge/store/pgtest"
)

// platform is a SQLite platform with a record in every table a platform
// fills, and what a test needs to know of it.
type platform struct {
	db *store.DB
	// in1 is alice's installation in location 1, held by hub h1, which
	// follows the change log from hubCursor/hubTag (not the newest point:
	// a change came after it).
	in1                *bridge.Installation
	hubCursor          int64
	hubTag             string
	deletedUserID      int64
	compacted, entries int64
}

func populatedPlatform(t *testing.T) *platform {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	p := &platform{db: db}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	hour := time.Now().Add(time.Hour)
	for _, h := range []*bridge.RegisteredHub{{ID: "h1", Name: "house", BaseURL: "http://h1", SecretHash: []byte("s1")}, {ID: "h2", Name: "barn", BaseURL: "http://h2", SecretHash: []byte("s2")}} {
		must(accounts.New(db).CreateHub(ctx, h))
	}
	sw := []bridge.RemoteSwitch{{ID: "lamp", Name: "Lamp", Commands: []bridge.Command{bridge.CommandOn, bridge.CommandOff}}, {ID: "fan", Name: "Fan", Commands: []bridge.Command{bridge.CommandOn}}}
	must(accounts.New(db).SetInventory(ctx, "h1", "v1.2.3", []bridge.RemoteLocation{{ID: 1, Name: "House", Switches: sw}, {ID: 2, Name: "Garage"}}, nil))
	must(accounts.New(db).SetInventory(ctx, "h2", "v1.2.3", []bridge.RemoteLocation{{ID: 3, Name: "Barn"}}, nil))

	alice, err := accounts.New(db).CreateUser(ctx, "alice", []byte("alice-hash"), []int64{1, 3})
	must(err)
	bob, err := accounts.New(db).CreateUser(ctx, "bob", []byte("bob-hash"), []int64{2})
	must(err)
	carol, err := accounts.New(db).CreateUser(ctx, "carol", []byte("carol-hash"), []int64{2})
	must(err)
	must(accounts.New(db).DeleteUser(ctx, "carol")) // the highest user id, never to be given again
	p.deletedUserID = carol.ID

	must(accounts.New(db).CreateApp(ctx, &bridge.App{ClientID: "c1", Name: "Lights", SecretHash: []byte("c1-secret"), RedirectURIs: []string{"https://a/cb", "https://b/cb"}, OwnerID: alice.ID}))
	must(accounts.New(db).SetAppPublished(ctx, "c1", true))
	must(accounts.New(db).CreateApp(ctx, &bridge.App{ClientID: "c2", Name: "Old", SecretHash: []byte("c2-secret"), RedirectURIs: []string{"com.example.old:/cb"}, OwnerID: bob.ID}))
	must(accounts.New(db).SetAppLegacy(ctx, "c2", true))
	must(accounts.New(db).SetAppAccessTokenLifetime(ctx, "c2", 90*time.Second))

	p.in1 = &bridge.Installation{ClientID: "c1", UserID: alice.ID, LocationID: 1, SwitchIDs: []string{"lamp", "fan"}}
	must(accounts.New(db).Install(ctx, p.in1))
	in2 := &bridge.Installation{ClientID: "c2", UserID: bob.ID, LocationID: 2, SwitchIDs: []string{"door"}}
	must(accounts.New(db).Install(ctx, in2))
	in3 := &bridge.Installation{ClientID: "c1", UserID: alice.ID, LocationID: 3, SwitchIDs: []string{"barn"}}
	must(accounts.New(db).Install(ctx, in3))

	ok := func(bridge.AuthCode) error { return nil }
	must(accounts.New(db).CreateCode(ctx, []byte("code0"), bridge.AuthCode{ClientID: "c1", RedirectURI: "https://a/cb", InstallationID: p.in1.ID, ExpiresAt: hour, CodeChallenge: "chal"}))
	_, err = accounts.New(db).RedeemCode(ctx, []byte("code0"), ok, bridge.TokenPair{AccessHash: []byte("a0"), AccessExpiresAt: hour, RefreshHash: []byte("r0"), RefreshExpiresAt: hour})
	must(err)
	_, err = accounts.New(db).Refresh(ctx, []byte("r0"), func(bridge.RefreshToken) error { return nil }, bridge.TokenPair{AccessHash: []byte("a1"), AccessExpiresAt: hour, RefreshHash: []byte("r1"), RefreshExpiresAt: hour})
	must(err)
	_, err = accounts.New(db).RevokeToken(ctx, []byte("a0"), "c1")
	must(err)
	must(accounts.New(db).CreateToken(ctx, []byte("plain"), in2.ID, hour))
	must(accounts.New(db).CreateCode(ctx, []byte("code-unused"), bridge.AuthCode{ClientID: "c2", RedirectURI: "com.example.old:/cb", InstallationID: in2.ID, ExpiresAt: hour}))

	must(hubstore.New(db).AddWebhook(ctx, &bridge.Webhook{ID: "wh1", InstallationID: p.in1.ID, URL: "https://hooks.example/a", Secret: "whsec_x"}, 5))
	must(hubstore.New(db).EnqueueWebhookDeliveries(ctx, []bridge.WebhookDelivery{{WebhookID: "wh1", SwitchID: "lamp", MsgID: "msg_1", Payload: []byte(`{"value":"on"}`), QueuedAt: time.Now(), NextAt: time.Now()}}))
	must(db.SaveSwitchValue(ctx, "desk", bridge.On, time.Now()))
	must(db.FoldJournal(ctx, []store.SwitchValue{{SwitchID: "desk", Value: bridge.Off, At: time.Now()}}, store.JournalMark{Generation: 42, Size: 100}))
	must(accounts.New(db).TouchHub(ctx, "h1", 3, time.Now()))
	_, err = accounts.New(db).RemoveHub(ctx, "h2") // a removed hub, and in3 uninstalled with it
	must(err)

	// Compaction leaves a floor and its tag; the entries after it stay.
	n, err := accounts.New(db).CompactChanges(ctx, time.Now().Add(-time.Hour), 6)
	must(err)
	if n == 0 {
		t.Fatal("compaction dropped nothing; the fixture wants a floor")
	}
	p.compacted = n
	snap, err := accounts.New(db).Snapshot(ctx, "h1")
	must(err)
	p.hubCursor, p.hubTag = snap.Cursor, snap.CursorTag
	must(accounts.New(db).TouchHub(ctx, "h1", p.hubCursor, time.Now()))
	// A change the hub has not fetched yet.
	must(accounts.New(db).CreateToken(ctx, []byte("pending"), p.in1.ID, hour))
	p.entries, err = accounts.New(db).ChangeSeq(ctx)
	must(err)
	return p
}

// everyPlatformTable are the tables a platform fills, each of which the
// fixture must give rows for the copy to be tested on it.
var everyPlatformTable = []string{
	"users", "user_locations", "apps", "app_redirect_uris", "installations", "installation_switches",
	"codes", "tokens", "refresh_tokens", "switch_states", "journal_fold", "hubs", "hub_locations",
	"hub_switches", "removed_hubs", "changes", "change_floor", "id_high_water", "webhooks",
	"webhook_outbox", "access_generation",
}

func openTarget(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.OpenPostgres(context.Background(), pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func dump(t *testing.T, db *store.DB) map[string][]string {
	t.Helper()
	d, err := db.DumpTables(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// sameTables reports the first difference between two dumps.
func sameTables(t *testing.T, what string, want, got map[string][]string) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if _, ok := got[name]; !ok {
			t.Errorf("%s: table %s missing", what, name)
			continue
		}
		if !slices.Equal(want[name], got[name]) {
			t.Errorf("%s: table %s differs:\nwant %q\ngot  %q", what, name, want[name], got[name])
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: unexpected table %s", what, name)
		}
	}
}

func TestCopyToPostgresMovesEveryRecord(t *testing.T) {
	ctx := context.Background()
	p := populatedPlatform(t)
	src := p.db
	before := dump(t, src)
	for _, name := range everyPlatformTable {
		if len(before[name]) == 0 {
			t.Fatalf("the fixture has no rows in %s", name)
		}
	}
	srcGrant, err := accounts.New(src).TokenGrant(ctx, []byte("a1"))
	if err != nil {
		t.Fatal(err)
	}
	srcBatch, err := accounts.New(src).Changes(ctx, "h1", p.hubCursor)
	if err != nil {
		t.Fatal(err)
	}
	srcGen, err := src.AccessGeneration(ctx)
	if err != nil {
		t.Fatal(err)
	}

	dst := openTarget(t)
	rep, err := store.CopyToPostgres(ctx, src, dst)
	if err != nil {
		t.Fatal(err)
	}

	// Every row of every table, as it was; the source untouched.
	sameTables(t, "PostgreSQL after the copy", before, dump(t, dst))
	sameTables(t, "SQLite after the copy", before, dump(t, src))
	var tables []string
	for _, tr := range rep.Tables {
		tables = append(tables, tr.Table)
		if int(tr.Rows) != len(before[tr.Table]) {
			t.Errorf("report: %s %d rows, the source has %d", tr.Table, tr.Rows, len(before[tr.Table]))
		}
	}
	if len(tables) != len(before) {
		t.Errorf("report lists %d tables, the schema has %d: %v", len(tables), len(before), tables)
	}
	// Parents before children.
	for _, pc := range [][2]string{{"users", "apps"}, {"apps", "installations"}, {"installations", "tokens"}, {"hubs", "hub_locations"}, {"hub_locations", "hub_switches"}, {"webhooks", "webhook_outbox"}} {
		if slices.Index(tables, pc[0]) > slices.Index(tables, pc[1]) {
			t.Errorf("%s copied after %s: %v", pc[0], pc[1], tables)
		}
	}
	if rep.Cursor != p.entries || rep.NextChange != p.entries+1 {
		t.Errorf("report: cursor %d, next change %d; the log ends at %d", rep.Cursor, rep.NextChange, p.entries)
	}
	if off, err := dst.TriggersDisabled(ctx); err != nil || len(off) > 0 {
		t.Errorf("triggers left disabled: %v %v", off, err)
	}

	// A token issued on SQLite validates on PostgreSQL, bound to the same
	// grant; a revoked one stays revoked; the access generation is the
	// same, so no hub drops its cached grants for the move.
	grant, err := accounts.New(dst).TokenGrant(ctx, []byte("a1"))
	if err != nil || !reflect.DeepEqual(grant, srcGrant) {
		t.Errorf("token a1 on PostgreSQL: %+v %v; on SQLite %+v", grant, err, srcGrant)
	}
	if tok, err := accounts.New(dst).Token(ctx, []byte("a0")); err != nil || !tok.Revoked {
		t.Errorf("revoked token a0 on PostgreSQL: %+v %v", tok, err)
	}
	if gen, err := dst.AccessGeneration(ctx); err != nil || gen != srcGen {
		t.Errorf("access generation on PostgreSQL %d (%v), on SQLite %d", gen, err, srcGen)
	}

	// The hub resumes from its cursor, without a snapshot, and gets what
	// it would have got from SQLite.
	if err := dst.CheckCursor(ctx, p.hubCursor, p.hubTag); err != nil {
		t.Errorf("the hub's cursor on PostgreSQL: %v", err)
	}
	if err := dst.CheckCursor(ctx, rep.Cursor, rep.CursorTag); err != nil {
		t.Errorf("the newest cursor on PostgreSQL: %v", err)
	}
	batch, err := accounts.New(dst).Changes(ctx, "h1", p.hubCursor)
	if err != nil || !reflect.DeepEqual(batch, srcBatch) {
		t.Errorf("changes after the hub's cursor on PostgreSQL: %+v %v; on SQLite %+v", batch, err, srcBatch)
	}

	// New writes: the change log goes on above every old sequence, a new
	// user gets an id above every one given (the deleted user's too), and
	// the triggers work again (a revocation moves the access generation).
	if err := accounts.New(dst).CreateToken(ctx, []byte("after"), p.in1.ID, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if seq, err := accounts.New(dst).ChangeSeq(ctx); err != nil || seq != rep.NextChange {
		t.Errorf("the first change on PostgreSQL has seq %d (%v), want %d", seq, err, rep.NextChange)
	}
	b, err := accounts.New(dst).Changes(ctx, "h1", rep.Cursor)
	if err != nil || len(b.Tokens) != 1 || string(b.Tokens[0].Hash) != "after" {
		t.Errorf("the hub's next batch on PostgreSQL: %+v %v", b, err)
	}
	dave, err := accounts.New(dst).CreateUser(ctx, "dave", []byte("x"), []int64{1})
	if err != nil || dave.ID <= p.deletedUserID {
		t.Errorf("a new user on PostgreSQL: %+v %v; the deleted user had id %d", dave, err, p.deletedUserID)
	}
	if _, err := accounts.New(dst).RevokeToken(ctx, []byte("a1"), "c1"); err != nil {
		t.Fatal(err)
	}
	if gen, err := dst.AccessGeneration(ctx); err != nil || gen <= srcGen {
		t.Errorf("a revocation on PostgreSQL left the access generation at %d (%v)", gen, err)
	}
	// The refresh token's reuse detection holds across the move: r0 was
	// spent on SQLite.
	if _, err := accounts.New(dst).Refresh(ctx, []byte("r0"), func(bridge.RefreshToken) error { return nil }, bridge.TokenPair{AccessHash: []byte("a9"), AccessExpiresAt: time.Now().Add(time.Hour)}); !errors.Is(err, bridge.ErrRefreshReused) {
		t.Errorf("spending r0 again on PostgreSQL: %v", err)
	}
}

func TestCopyToPostgresRefusesAUsedTarget(t *testing.T) {
	ctx := context.Background()
	p := populatedPlatform(t)
	for name, use := range map[string]func(*store.DB) error{
		"a user": func(db *store.DB) error {
			_, err := accounts.New(db).CreateUser(ctx, "zed", []byte("x"), []int64{9})
			return err
		},
		// Emptied again, it still gave user ids: copying would give them
		// twice.
		"a deleted user": func(db *store.DB) error {
			if _, err := accounts.New(db).CreateUser(ctx, "zed", []byte("x"), nil); err != nil {
				return err
			}
			return accounts.New(db).DeleteUser(ctx, "zed")
		},
		"a hub": func(db *store.DB) error {
			return accounts.New(db).CreateHub(ctx, &bridge.RegisteredHub{ID: "hx", Name: "other", BaseURL: "http://x", SecretHash: []byte("x")})
		},
	} {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			dst := openTarget(t)
			if err := use(dst); err != nil {
				t.Fatal(err)
			}
			before := dump(t, dst)
			_, err := store.CopyToPostgres(ctx, p.db, dst)
			if !errors.Is(err, store.ErrTargetNotEmpty) {
				t.Fatalf("copy into a database with %s: %v", name, err)
			}
			if !strings.Contains(err.Error(), "never merges") {
				t.Errorf("the refusal does not say why: %v", err)
			}
			sameTables(t, "the refused target", before, dump(t, dst))
		})
	}
}

func TestCopyToPostgresRefusesAHub(t *testing.T) {
	ctx := context.Background()
	hub, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	if err := hubstore.New(hub).ApplyBatch(ctx, &bridge.ChangeBatch{Cursor: 5, CursorTag: "t", Snapshot: true}, time.Now()); err != nil {
		t.Fatal(err)
	}
	dst := openTarget(t)
	fresh := dump(t, dst)
	if _, err := store.CopyToPostgres(ctx, hub, dst); !errors.Is(err, store.ErrSourceIsReplica) {
		t.Fatalf("copying a hub's database: %v", err)
	}
	sameTables(t, "the refused target", fresh, dump(t, dst))
}

// A copy that fails half way, however it fails, leaves the target as it
// was: empty, its triggers on, ready for the copy to be run again.
func TestCopyToPostgresFailureLeavesNothing(t *testing.T) {
	ctx := context.Background()
	check := func(t *testing.T, dst *store.DB, fresh map[string][]string) {
		t.Helper()
		sameTables(t, "the target after a failed copy", fresh, dump(t, dst))
		if off, err := dst.TriggersDisabled(ctx); err != nil || len(off) > 0 {
			t.Errorf("triggers left disabled: %v %v", off, err)
		}
	}

	t.Run("a row PostgreSQL refuses", func(t *testing.T) {
		p := populatedPlatform(t)
		// An outbox entry of no webhook: SQLite checks foreign keys only
		// when asked (per connection), PostgreSQL always.
		if err := p.db.ExecWithoutForeignKeys(ctx, `INSERT INTO webhook_outbox (webhook_id, switch_id, version, msg_id, payload, queued_at, next_at)
			VALUES ('gone', 'lamp', 1, 'm', x'00', 0, 0)`); err != nil {
			t.Fatal(err)
		}
		dst := openTarget(t)
		fresh := dump(t, dst)
		_, err := store.CopyToPostgres(ctx, p.db, dst)
		if err == nil || !strings.Contains(err.Error(), "webhook_outbox") {
			t.Fatalf("copy with an orphan row: %v", err)
		}
		check(t, dst, fresh)
		if err := p.db.ExecWithoutForeignKeys(ctx, `DELETE FROM webhook_outbox WHERE webhook_id = 'gone'`); err != nil {
			t.Fatal(err)
		}
		rep, err := store.CopyToPostgres(ctx, p.db, dst)
		if err != nil {
			t.Fatalf("the copy again, the row removed: %v", err)
		}
		if rep.NextChange != p.entries+1 {
			t.Errorf("next change %d after a failed and a good copy, want %d", rep.NextChange, p.entries+1)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		p := populatedPlatform(t)
		dst := openTarget(t)
		fresh := dump(t, dst)
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		old := *store.AfterCopyTable
		*store.AfterCopyTable = func(table string) {
			if table == "installations" {
				cancel()
			}
		}
		defer func() { *store.AfterCopyTable = old }()
		if _, err := store.CopyToPostgres(cctx, p.db, dst); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled copy: %v", err)
		}
		check(t, dst, fresh)
	})

	t.Run("schemas of other versions", func(t *testing.T) {
		p := populatedPlatform(t)
		if err := p.db.ExecWithoutForeignKeys(ctx, `ALTER TABLE users ADD COLUMN nickname TEXT`); err != nil {
			t.Fatal(err)
		}
		dst := openTarget(t)
		fresh := dump(t, dst)
		_, err := store.CopyToPostgres(ctx, p.db, dst)
		if err == nil || !strings.Contains(err.Error(), "schemas differ") || !strings.Contains(err.Error(), "nickname") {
			t.Fatalf("copy between schemas of other versions: %v", err)
		}
		check(t, dst, fresh)
	})
}

// SQLite never gives a sequence twice, even one whose entry is gone:
// neither does PostgreSQL after the copy.
func TestCopyToPostgresContinuesAfterSQLitesSequence(t *testing.T) {
	ctx := context.Background()
	p := populatedPlatform(t)
	if err := p.db.ExecWithoutForeignKeys(ctx, `DELETE FROM changes WHERE seq > ?`, p.entries-2); err != nil {
		t.Fatal(err)
	}
	dst := openTarget(t)
	rep, err := store.CopyToPostgres(ctx, p.db, dst)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Cursor != p.entries-2 || rep.NextChange != p.entries+1 {
		t.Errorf("cursor %d, next change %d; want %d and %d", rep.Cursor, rep.NextChange, p.entries-2, p.entries+1)
	}
	if err := accounts.New(dst).CreateToken(ctx, []byte("after"), p.in1.ID, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if seq, err := accounts.New(dst).ChangeSeq(ctx); err != nil || seq != p.entries+1 {
		t.Errorf("the first change on PostgreSQL has seq %d (%v), want %d", seq, err, p.entries+1)
	}
}
