// Package logtest gives tests somewhere to send a log, or a process's
// stderr, that they can read while the code under test still writes to it,
// and checks at a test's end that no log holds a secret the tests made or
// were handed (NoteSecret, Watch).
package logtest

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for writers in other goroutines.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
