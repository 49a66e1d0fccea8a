package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/config"
)

// TestExposedSecrets: any access for users outside the owner and group is
// warned about; the group's read access and a missing file are not.
func TestExposedSecrets(t *testing.T) {
	dir := t.TempDir()
	for mode, warn := range map[os.FileMode]bool{0o600: false, 0o640: false, 0o400: false, 0o644: true, 0o604: true, 0o602: true, 0o601: true} {
		f := filepath.Join(dir, "key")
		os.WriteFile(f, []byte("k"), 0o600)
		if err := os.Chmod(f, mode); err != nil {
			t.Fatal(err)
		}
		got := config.ExposedSecrets([]config.SecretFile{{Key: "server.tls.key_file", Path: f, Line: 7}})
		if (len(got) == 1) != warn || (warn && got[0].Line != 7) {
			t.Errorf("mode %04o: %v, want a warning: %v", mode, got, warn)
		}
	}
	if got := config.ExposedSecrets([]config.SecretFile{{Key: "platform.secret_file", Path: filepath.Join(dir, "gone")}}); len(got) != 0 {
		t.Errorf("a missing file: %v", got)
	}
}
