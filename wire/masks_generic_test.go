//go:build !amd64 || purego

package wire

// skipPlainWays are the ways of skipPlain this build runs: the portable
// one alone.
func skipPlainWays() map[string]func([]byte, uint64) (int, uint64) {
	return map[string]func([]byte, uint64) (int, uint64){"words": skipPlain}
}
