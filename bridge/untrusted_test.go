package bridge_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/bridge"
)

func TestUntrusted(t *testing.T) {
	long := strings.Repeat("a", 12<<10)
	for in, want := range map[string]string{
		"hub-1a2b":                   "hub-1a2b",
		"Küche":                      "Küche",
		"a\nlevel=ERROR msg=forged":  `a\x0alevel=ERROR msg=forged`,
		"\x1b[31mred":                `\x1b[31mred`,
		"evil\u202etxt.exe":          `evil\u202etxt.exe`,
		"bad\xffutf8":                `bad\xffutf8`,
		long:                         strings.Repeat("a", bridge.MaxLogValue) + "…(12288 bytes in all)",
		strings.Repeat("\n", 10_000): strings.Repeat(`\x0a`, bridge.MaxLogValue/4) + "…(10000 bytes in all)",
	} {
		if got := bridge.Untrusted(in).String(); got != want {
			t.Errorf("Untrusted(%.40q) = %.80q, want %.80q", in, got, want)
		}
	}
	// Through slog, as the call sites use it.
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("refused", "hub", bridge.Untrusted(long))
	if n := buf.Len(); n > 2*bridge.MaxLogValue {
		t.Errorf("a 12 KB value makes a %d-byte log line", n)
	}
}
