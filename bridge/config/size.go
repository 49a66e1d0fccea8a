package config

// ByteSize (server.memory_limit) and the bounds of the server's resource
// keys.

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Limits of the server's resource keys.
const (
	// MaxMaxConnections is far beyond what a Pi serves: a typo, not a need.
	MaxMaxConnections = 1 << 16
	// MinMemoryLimit keeps a limit below the idle hub's own needs, where
	// the garbage collector would run without pause, from being set.
	MinMemoryLimit = 32 << 20
)

// ByteSize is an amount of memory written as GOMEMLIMIT writes it: a
// number of bytes with an optional B, KiB, MiB, GiB or TiB suffix
// ("128MiB"), or off for no limit (NoLimit).
type ByteSize int64

// NoLimit is the ByteSize of off: Go's "no memory limit".
const NoLimit ByteSize = math.MaxInt64

var sizeUnits = []struct {
	suffix string
	shift  uint
}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}

// ParseByteSize reads a ByteSize.
func ParseByteSize(s string) (ByteSize, error) {
	if s == "off" {
		return NoLimit, nil
	}
	num, shift := s, uint(0)
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, shift = n, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("%q is not a size (examples: 128MiB, 1GiB, off)", s)
	}
	return ByteSize(n << shift), nil
}

// UnmarshalYAML parses a size.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseByteSize(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode {
		return typeError(n, fmt.Sprintf("%q is not a size (examples: 128MiB, 1GiB, off)", n.Value))
	}
	*b = v
	return nil
}

// String writes b in the largest unit that divides it.
func (b ByteSize) String() string {
	if b == NoLimit {
		return "off"
	}
	for _, u := range sizeUnits {
		if u.shift > 0 && b != 0 && b%(1<<u.shift) == 0 {
			return strconv.FormatInt(int64(b>>u.shift), 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(b), 10) + "B"
}
