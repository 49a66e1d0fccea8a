package oauth

import "testing"

func TestIDOrZero(t *testing.T) {
	for in, want := range map[string]int64{
		"1":                   1,
		"42":                  42,
		"000007":              7,
		"999999999999999999":  999999999999999999,
		"1000000000000000000": 0, // 19 digits could overflow
		"":                    0,
		"-1":                  0,
		"+1":                  0,
		"1.0":                 0,
		" 1":                  0,
		"١":                   0, // a digit, but not an ASCII one
	} {
		if got := idOrZero(in); got != want {
			t.Errorf("idOrZero(%q) = %d, want %d", in, got, want)
		}
	}
}
