package logtest

import (
	"fmt"
	"strings"
	"testing"
)

// TestLeaksFindsEveryForm: a noted secret is found as it is, escaped for
// a URL and quoted, at the start, middle and end of a log, with its line;
// a secret's neighbours, prefixes and short values are not.
func TestLeaksFindsEveryForm(t *testing.T) {
	plain := "PlantedSecret-" + t.Name()
	spaced := "two words & more " + t.Name()
	NoteSecret(plain)
	NoteSecret(spaced)
	NoteSecret("short") // shorter than MinSecretLen: ignored
	for _, c := range []struct {
		log  string
		want string // the secret found, "" for none
		line string
	}{
		{plain, plain, plain},
		{"level=INFO msg=x\nlevel=WARN token=" + plain + " rest\nlast", plain, "level=WARN token=" + plain + " rest"},
		{`msg="` + strings.ReplaceAll(spaced, "&", `\u0026`) + `"`, "", ""}, // a form NoteSecret does not know
		{"path=/x?p=" + "two+words+%26+more+" + t.Name(), spaced, "path=/x?p=two+words+%26+more+" + t.Name()},
		{fmt.Sprintf("err=%q", "x\"y "+spaced), spaced, fmt.Sprintf("err=%q", "x\"y "+spaced)},
		{plain[:len(plain)-1] + "!", "", ""},
		{"a short word", "", ""},
	} {
		got := Leaks(c.log)
		switch {
		case c.want == "" && len(got) != 0:
			t.Errorf("Leaks(%q) = %+v, want none", c.log, got)
		case c.want != "" && (len(got) != 1 || got[0].Secret != c.want || got[0].Line != c.line):
			t.Errorf("Leaks(%q) = %+v, want %q on line %q", c.log, got, c.want, c.line)
		}
	}
	if SecretsNoted() < 2 {
		t.Errorf("SecretsNoted = %d", SecretsNoted())
	}
}

// recordingTB is a testing.TB whose failures and cleanups are kept.
type recordingTB struct {
	testing.TB
	errors   []string
	cleanups []func()
}

func (r *recordingTB) Helper()          {}
func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }
func (r *recordingTB) Errorf(format string, a ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, a...))
}

// TestWatchFailsTheTestOfALeak: a watched log that holds a noted secret
// when its test ends fails that test, naming the log and the line; a
// clean one does not; and the scan runs at the end, so a line written
// after Watch (by a daemon still stopping) is seen.
func TestWatchFailsTheTestOfALeak(t *testing.T) {
	secret := "sb_planted_" + t.Name()
	NoteSecret(secret)
	rec := &recordingTB{TB: t}
	leaky := Watched(rec, "the planted hub")
	clean := Watched(rec, "the clean hub")
	leaky.Write([]byte("level=INFO msg=ok\n"))
	clean.Write([]byte("level=INFO msg=ok\n"))
	leaky.Write([]byte("level=ERROR msg=\"request failed\" authorization=\"Bearer " + secret + "\"\n"))
	for _, f := range rec.cleanups {
		f()
	}
	if len(rec.errors) != 1 || !strings.Contains(rec.errors[0], "the planted hub logged a secret") ||
		!strings.Contains(rec.errors[0], `msg="request failed"`) || !strings.Contains(rec.errors[0], Redact(secret)) {
		t.Errorf("the scan reported %q", rec.errors)
	}
}
