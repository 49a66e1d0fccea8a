package oauth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"

	"github.com/switchbridge/switchbridge/bridge/access"
)

// NewSecret returns 256 random bits, base64url without padding: used for
// codes, tokens, client secrets, session ids and CSRF tokens.
func NewSecret() string {
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand panics rather than return short)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// NewClientID returns a random client id in UUID form, as the original
// platform's client ids were.
func NewClientID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Hash is how a high-entropy secret is stored and looked up: the token
// check's (access.Hash), for codes, client and hub secrets and sessions
// as for tokens.
func Hash(secret string) []byte { return access.Hash(secret) }

// SecretMatches compares a presented secret with a stored hash in constant time.
func SecretMatches(presented string, stored []byte) bool {
	return subtle.ConstantTimeCompare(Hash(presented), stored) == 1
}

// pkceMatches checks a PKCE verifier against an S256 challenge (RFC 7636
// §4.6), in constant time.
func pkceMatches(verifier, challenge string) bool {
	if !validChallenge(verifier) {
		return false
	}
	sum := sha256.Sum256([]byte(verifier))
	want := base64.RawURLEncoding.EncodeToString(sum[:])
	return subtle.ConstantTimeCompare([]byte(want), []byte(challenge)) == 1
}
