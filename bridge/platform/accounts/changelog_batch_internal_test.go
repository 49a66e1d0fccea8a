package accounts

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// feedModel is what a test wrote to the platform's store, kept beside it:
// the records as they are now, and the change log's entries in order.
type feedModel struct {
	insts   map[string]*modelInstallation
	toks    map[string]*modelToken // by hash
	members map[[2]int64]bool      // user id, location
	log     []modelChange
}

type modelInstallation struct {
	id, client      string
	user, loc       int64
	created, update int64
	switchID        string
}

type modelToken struct {
	hash             []byte
	inst             string
	created, expires int64
	revoked          bool
}

type modelChange struct {
	kind, key string
	loc       int64
}

// loadModel returns the model of the fixture's records, as the store
// holds them.
func loadModel(t *testing.T, f *feedFixture) *feedModel {
	t.Helper()
	m := &feedModel{insts: map[string]*modelInstallation{}, toks: map[string]*modelToken{}, members: map[[2]int64]bool{}}
	rows, err := f.db.db.QueryContext(f.ctx, `SELECT i.id, i.client_id, i.user_id, i.location_id, i.created_at, i.updated_at, s.switch_id
		FROM installations i JOIN installation_switches s ON s.installation_id = i.id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		in := &modelInstallation{}
		if err := rows.Scan(&in.id, &in.client, &in.user, &in.loc, &in.created, &in.update, &in.switchID); err != nil {
			t.Fatal(err)
		}
		m.insts[in.id] = in
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		t.Fatal(err)
	}
	rows, err = f.db.db.QueryContext(f.ctx, `SELECT hash, installation_id, created_at, expires_at FROM tokens`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		tok := &modelToken{}
		if err := rows.Scan(&tok.hash, &tok.inst, &tok.created, &tok.expires); err != nil {
			t.Fatal(err)
		}
		m.toks[string(tok.hash)] = tok
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		t.Fatal(err)
	}
	if len(m.insts) != 2 || len(m.toks) != 2 {
		t.Fatalf("the fixture holds %d installations and %d tokens, want 2 of each", len(m.insts), len(m.toks))
	}
	for _, loc := range []int64{1, 3} {
		m.members[[2]int64{f.userID, loc}] = true
	}
	return m
}

// feedWriter writes to the store in one transaction, and the same to the
// model.
type feedWriter struct {
	t   *testing.T
	ctx context.Context
	tx  *sql.Tx
	m   *feedModel
}

func (w *feedWriter) exec(q string, args ...any) {
	w.t.Helper()
	if _, err := w.tx.ExecContext(w.ctx, q, args...); err != nil {
		w.t.Fatalf("%s: %v", q, err)
	}
}

func (w *feedWriter) changed(kind, key string, loc int64) {
	w.m.log = append(w.m.log, modelChange{kind, key, loc})
}

func (w *feedWriter) install(id, client string, user, loc, created int64) {
	w.t.Helper()
	in := &modelInstallation{id: id, client: client, user: user, loc: loc, created: created, update: created, switchID: "sw-" + id}
	w.exec(`INSERT INTO installations (id, client_id, user_id, location_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
		id, client, user, loc, created, created)
	w.exec(`INSERT INTO installation_switches (installation_id, pos, switch_id) VALUES (?, 0, ?)`, id, in.switchID)
	w.m.insts[id] = in
	w.changed("installation", id, loc)
}

func (w *feedWriter) issue(hash []byte, inst string, created, expires int64) {
	w.t.Helper()
	w.exec(`INSERT INTO tokens (hash, installation_id, created_at, expires_at) VALUES (?, ?, ?, ?)`, hash, inst, created, expires)
	w.m.toks[string(hash)] = &modelToken{hash: hash, inst: inst, created: created, expires: expires}
	w.changed("token", string(hash), w.m.insts[inst].loc)
}

func (w *feedWriter) revoke(hash []byte) {
	w.t.Helper()
	w.exec(`UPDATE tokens SET revoked_at = 1 WHERE hash = ?`, hash)
	tok := w.m.toks[string(hash)]
	tok.revoked = true
	w.changed("token", string(hash), w.m.insts[tok.inst].loc)
}

func (w *feedWriter) expire(hash []byte, at int64) {
	w.t.Helper()
	w.exec(`UPDATE tokens SET expires_at = ? WHERE hash = ?`, at, hash)
	tok := w.m.toks[string(hash)]
	tok.expires = at
	w.changed("token", string(hash), w.m.insts[tok.inst].loc)
}

func (w *feedWriter) dropToken(hash []byte) {
	w.t.Helper()
	w.exec(`DELETE FROM tokens WHERE hash = ?`, hash)
	tok := w.m.toks[string(hash)]
	delete(w.m.toks, string(hash))
	w.changed("token", string(hash), w.m.insts[tok.inst].loc)
}

func (w *feedWriter) update(id string) {
	w.t.Helper()
	in := w.m.insts[id]
	in.update++
	w.exec(`UPDATE installations SET updated_at = ? WHERE id = ?`, in.update, id)
	w.changed("installation", id, in.loc)
}

// move puts an installation into another location: the log holds it
// under both.
func (w *feedWriter) move(id string, loc int64) {
	w.t.Helper()
	in := w.m.insts[id]
	w.exec(`UPDATE installations SET location_id = ? WHERE id = ?`, loc, id)
	old := in.loc
	in.loc = loc
	w.changed("installation", id, loc)
	w.changed("installation", id, old)
}

// uninstall deletes an installation's tokens one by one, then the
// installation, so that no cascade writes to the log.
func (w *feedWriter) uninstall(id string) {
	w.t.Helper()
	var hashes [][]byte
	for _, tok := range w.m.toks {
		if tok.inst == id {
			hashes = append(hashes, tok.hash)
		}
	}
	slices.SortFunc(hashes, slices.Compare)
	for _, h := range hashes {
		w.dropToken(h)
	}
	in := w.m.insts[id]
	w.exec(`DELETE FROM installations WHERE id = ?`, id)
	delete(w.m.insts, id)
	w.changed("installation", id, in.loc)
}

func (w *feedWriter) join(user, loc int64) {
	w.t.Helper()
	w.exec(`INSERT INTO user_locations (user_id, location_id) VALUES (?, ?)`, user, loc)
	w.m.members[[2]int64{user, loc}] = true
	w.changed("member", strconv.FormatInt(user, 10), loc)
}

// expected is the batch a hub holding locs receives for the model's log:
// the records of each location it gained, of each membership changed, then
// of each installation and token changed, in the log's order, each once;
// a tombstone for each changed record gone or out of the hub's locations.
// Tokens a location brings are those not expired at now; a token changed
// is sent expired or not. inPath counts the changed installations and
// tokens read by key (not already sent).
func (m *feedModel) expected(locs []int64, now int64) (b *bridge.ChangeBatch, inPath [2]int) {
	b = &bridge.ChangeBatch{}
	held := func(loc int64) bool { return slices.Contains(locs, loc) }
	seen, seenTok := map[string]bool{}, map[string]bool{}
	addInst := func(in *modelInstallation) {
		if !seen[in.id] {
			seen[in.id] = true
			b.Installations = append(b.Installations, bridge.ReplicaInstallation{ID: in.id, ClientID: in.client, UserID: in.user,
				LocationID: in.loc, SwitchIDs: []string{in.switchID}, Member: m.members[[2]int64{in.user, in.loc}], UpdatedAt: fromUnix(in.update)})
		}
	}
	addTok := func(tok *modelToken) {
		if !seenTok[string(tok.hash)] {
			seenTok[string(tok.hash)] = true
			b.Tokens = append(b.Tokens, bridge.ReplicaToken{Hash: tok.hash, InstallationID: tok.inst, ExpiresAt: fromUnix(tok.expires), Revoked: tok.revoked})
		}
	}
	installations := func(match func(*modelInstallation) bool) []*modelInstallation {
		var ins []*modelInstallation
		for _, in := range m.insts {
			if match(in) {
				ins = append(ins, in)
			}
		}
		slices.SortFunc(ins, func(a, b *modelInstallation) int {
			return cmp.Or(cmp.Compare(a.created, b.created), cmp.Compare(a.id, b.id))
		})
		return ins
	}
	// Each location, membership, installation and token once, where the
	// log names it first.
	var gained []int64
	var joined [][2]int64
	var instKeys, tokKeys []string
	once := map[modelChange]bool{}
	for _, c := range m.log {
		if !held(c.loc) {
			continue
		}
		first := c
		switch c.kind {
		case "location":
			first.key = ""
		case "installation", "token":
			first.loc = 0
		}
		if once[first] {
			continue
		}
		once[first] = true
		switch c.kind {
		case "location":
			gained = append(gained, c.loc)
		case "member":
			user, _ := strconv.ParseInt(c.key, 10, 64)
			joined = append(joined, [2]int64{user, c.loc})
		case "installation":
			instKeys = append(instKeys, c.key)
		case "token":
			tokKeys = append(tokKeys, c.key)
		}
	}
	for _, loc := range gained {
		b.Locations = append(b.Locations, loc)
		for _, in := range installations(func(in *modelInstallation) bool { return in.loc == loc }) {
			addInst(in)
		}
		var toks []*modelToken
		for _, tok := range m.toks {
			if m.insts[tok.inst].loc == loc && tok.expires > now {
				toks = append(toks, tok)
			}
		}
		slices.SortFunc(toks, func(a, b *modelToken) int {
			return cmp.Or(cmp.Compare(a.created, b.created), slices.Compare(a.hash, b.hash))
		})
		for _, tok := range toks {
			addTok(tok)
		}
	}
	for _, j := range joined {
		for _, in := range installations(func(in *modelInstallation) bool { return in.user == j[0] && in.loc == j[1] }) {
			addInst(in)
		}
	}
	for _, id := range instKeys {
		if seen[id] {
			continue
		}
		inPath[0]++
		if in, ok := m.insts[id]; ok && held(in.loc) {
			addInst(in)
		} else {
			b.DeletedInstallations = append(b.DeletedInstallations, id)
		}
	}
	for _, key := range tokKeys {
		if seenTok[key] {
			continue
		}
		inPath[1]++
		if tok, ok := m.toks[key]; ok && held(m.insts[tok.inst].loc) {
			addTok(tok)
		} else {
			b.DeletedTokens = append(b.DeletedTokens, []byte(key))
		}
	}
	return b, inPath
}

// describeBatch lists a batch's records and tombstones one a line, in
// order, to compare batches by.
func describeBatch(b *bridge.ChangeBatch) []string {
	var lines []string
	for _, l := range b.Locations {
		lines = append(lines, fmt.Sprintf("location %d", l))
	}
	for _, in := range b.Installations {
		lines = append(lines, fmt.Sprintf("installation %s client %s user %d location %d switches %q member %v legacy %v updated %d",
			in.ID, in.ClientID, in.UserID, in.LocationID, in.SwitchIDs, in.Member, in.Legacy, unix(in.UpdatedAt)))
	}
	for _, t := range b.Tokens {
		lines = append(lines, fmt.Sprintf("token %x installation %s expires %d revoked %v", t.Hash, t.InstallationID, unix(t.ExpiresAt), t.Revoked))
	}
	for _, id := range b.DeletedInstallations {
		lines = append(lines, "installation gone "+id)
	}
	for _, h := range b.DeletedTokens {
		lines = append(lines, fmt.Sprintf("token gone %x", h))
	}
	return lines
}

// TestFeedReadsChangedRecordsInChunks: a batch that names more changed
// installations and tokens than one query reads (live, revoked, expired,
// deleted, moved to another hub's location or from one, each changed
// several times, some also sent for a location gained or a membership
// changed) is the batch the change log's order gives, record for record,
// for each of two hubs.
func TestFeedReadsChangedRecordsInChunks(t *testing.T) {
	ForEachDialect(t, func(t *testing.T) {
		f := newFeedFixture(t)
		ctx := f.ctx
		m := loadModel(t, f)

		const users, apps, n = 12, 14, 300
		var userIDs []int64
		for u := range users {
			var locs []int64
			if u%2 == 0 {
				locs = []int64{1, 2}
			}
			user, err := f.db.CreateUser(ctx, fmt.Sprintf("user%d", u), []byte("x"), locs)
			if err != nil {
				t.Fatal(err)
			}
			userIDs = append(userIDs, user.ID)
			for _, l := range locs {
				m.members[[2]int64{user.ID, l}] = true
			}
		}
		for a := range apps {
			if err := f.db.CreateApp(ctx, &bridge.App{ClientID: fmt.Sprintf("a%d", a), Name: "App", SecretHash: []byte("s"),
				RedirectURIs: []string{"https://a/cb"}, OwnerID: f.userID, Published: true}); err != nil {
				t.Fatal(err)
			}
		}
		now := time.Now()
		base, live, expired := unix(now.Add(-time.Hour)), unix(now.Add(time.Hour)), unix(now.Add(-time.Minute))
		id := func(i int) string { h := sha256.Sum256(fmt.Appendf(nil, "in%d", i)); return hex.EncodeToString(h[:6]) }
		hash := func(s string, i int) []byte { h := sha256.Sum256(fmt.Appendf(nil, "%s%d", s, i)); return h[:] }
		begin := func() *feedWriter {
			tx, err := f.db.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tx.Rollback() })
			return &feedWriter{t: t, ctx: ctx, tx: tx, m: m}
		}
		commit := func(w *feedWriter) {
			if err := w.tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}

		// Before the hubs' cursors: n installations in h1's locations 1
		// and 2, created in another order than their index, each with a
		// token; 12 in h2's location 3 and 20 in location 4, which no
		// hub holds yet, each with a token.
		w := begin()
		for i := range n {
			created := base + int64((i*37)%n)
			w.install(id(i), fmt.Sprintf("a%d", i/24), userIDs[(i/2)%users], int64(1+i%2), created)
			w.issue(hash("t", i), id(i), base+int64((i*53)%n), live)
		}
		for j := range 12 {
			w.install(id(1000+j), fmt.Sprintf("a%d", j), f.userID, 3, base+int64(j))
			w.issue(hash("t", 1000+j), id(1000+j), base+int64(j), live)
		}
		for j := range 20 {
			w.install(id(2000+j), fmt.Sprintf("a%d", j/12), userIDs[j%12], 4, base+int64(20-j))
			w.issue(hash("t", 2000+j), id(2000+j), base+int64(j%7), live)
		}
		commit(w)
		c1, c2 := f.changes(t, "h1", f.cursor1).Cursor, f.changes(t, "h2", f.cursor2).Cursor
		m.log = nil

		// After them: every kind of change, in an order that is neither
		// the records' creation order nor their index order.
		w = begin()
		for k := range n {
			i := (k * 97) % n
			tok := hash("t", i)
			switch k % 10 {
			case 0:
				w.revoke(tok)
			case 1:
				w.revoke(tok)
				w.update(id(i))
			case 2:
				w.expire(tok, expired)
			case 3:
				w.revoke(tok)
				w.expire(tok, expired)
				w.revoke(tok)
			case 4:
				w.dropToken(tok)
			case 5:
				w.update(id(i))
			case 6:
				w.update(id(i))
				w.revoke(tok)
				w.update(id(i))
			case 8:
				// A refresh: a new token, the old one revoked.
				w.issue(hash("r", i), id(i), base+int64(n+k), live)
				w.revoke(tok)
			case 9:
				if i%3 == 0 {
					w.uninstall(id(i))
				} else {
					w.update(id(i))
					w.expire(tok, expired)
				}
			}
		}
		// New installations, one with an expired token.
		for j := range 24 {
			w.install(id(3000+j), fmt.Sprintf("a%d", apps-1), userIDs[j/2], int64(1+j%2), base+int64(n+j))
			exp := live
			if j == 5 {
				exp = expired
			}
			w.issue(hash("t", 3000+j), id(3000+j), base+int64(j), exp)
		}
		// Moved to h2, a token of it changed before; moved from h2 to h1,
		// a token of it changed after.
		w.issue(hash("m", 7), id(7), base, live)
		w.revoke(hash("m", 7))
		w.move(id(7), 3)
		w.move(id(1003), 2)
		w.revoke(hash("t", 1003))
		// h2's own changes, and h1's location 4 changing while no hub
		// holds it.
		w.revoke(f.tok3)
		w.update(id(1005))
		for j := range 20 {
			switch j % 5 {
			case 0:
				w.revoke(hash("t", 2000+j))
			case 1:
				w.expire(hash("t", 2000+j), expired)
			case 2:
				w.update(id(2000 + j))
			case 3:
				w.uninstall(id(2000 + j))
			}
		}
		// A user joins location 1: all their installations there.
		w.join(userIDs[1], 1)
		// And changes again to records changed above.
		for i := 0; i < n; i += 11 {
			if _, ok := m.toks[string(hash("t", i))]; ok {
				w.revoke(hash("t", i))
			}
			if _, ok := m.insts[id(i)]; ok {
				w.update(id(i))
			}
		}
		commit(w)
		// h1 gains location 4.
		if err := f.db.SetInventory(ctx, "h1", "v2", []bridge.RemoteLocation{{ID: 1, Name: "House"}, {ID: 2, Name: "Garage"}, {ID: 4, Name: "Loft"}}, nil); err != nil {
			t.Fatal(err)
		}
		m.log = append(m.log, modelChange{"location", "h1", 4})

		for _, hub := range []struct {
			id     string
			cursor int64
			locs   []int64
		}{{"h1", c1, []int64{1, 2, 4}}, {"h2", c2, []int64{3}}} {
			got := f.changes(t, hub.id, hub.cursor)
			want, inPath := m.expected(hub.locs, unix(time.Now()))
			g, e := describeBatch(got), describeBatch(want)
			if !slices.Equal(g, e) {
				for i := range max(len(g), len(e)) {
					gl, el := "(none)", "(none)"
					if i < len(g) {
						gl = g[i]
					}
					if i < len(e) {
						el = e[i]
					}
					if gl != el {
						t.Errorf("%s: line %d of %d (want %d) is\n%s\nwant\n%s", hub.id, i, len(g), len(e), gl, el)
						break
					}
				}
			}
			if hub.id == "h2" && (len(want.Installations) != 2 || len(want.Tokens) != 1 || len(want.DeletedInstallations) != 1) {
				t.Errorf("h2's batch: %d installations, %d tokens, %d installations gone; want 2 (one moved in), 1 and 1 (moved out)",
					len(want.Installations), len(want.Tokens), len(want.DeletedInstallations))
			}
			if hub.id == "h1" {
				// The batch is what this test is about only if it holds
				// more keys of each kind than one query reads, and each
				// kind of record.
				largest := feedChunkSizes[len(feedChunkSizes)-1]
				if inPath[0] <= largest || inPath[1] <= 2*largest {
					t.Errorf("h1 reads %d installations and %d tokens by key, want more than %d and %d", inPath[0], inPath[1], largest, 2*largest)
				}
				var revoked, expiredN int
				for _, tok := range want.Tokens {
					if tok.Revoked {
						revoked++
					}
					if unix(tok.ExpiresAt) == expired {
						expiredN++
					}
				}
				if revoked == 0 || expiredN == 0 || len(want.Tokens) == revoked || len(want.DeletedTokens) == 0 || len(want.DeletedInstallations) < 2 ||
					!slices.Equal(want.Locations, []int64{4}) {
					t.Errorf("h1's batch lacks a kind of record: %d tokens, %d revoked, %d expired, %d tokens gone, %d installations gone, locations %v",
						len(want.Tokens), revoked, expiredN, len(want.DeletedTokens), len(want.DeletedInstallations), want.Locations)
				}
			}
		}
	})
}
