// Package partition gives each request its cache partition: the tenants
// that may share what the prefix caches hold (the gateway's prefix index,
// the engines' own prefix caches). By default a principal shares only
// with itself; an operator may let a team, or every caller of a model,
// share. Requests of different partitions never match in the index, so
// no figure the gateway shows (Llmedge-Route's cached share, the routing
// decision, the metrics) tells one tenant about another's prompts, and
// the engine is given a salt per partition (vLLM's cache_salt), so its
// cache cannot be probed by timing either.
//
// Keys and salts derive from one gateway secret that every instance
// shares: the same partition keys the same index blocks and the same
// engine salt on every instance, so routing shared through Redis keeps
// working; without the secret a salt cannot be guessed from a tenant's
// name.
package partition

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/cespare/xxhash/v2"
)

// Sharing says who shares a model's cache partition.
type Sharing uint8

// The sharing choices. The zero value is the default: per principal.
const (
	// Principal gives every principal a partition of its own.
	Principal Sharing = iota
	// Team makes a team's principals share one partition; a principal
	// of no team keeps its own.
	Team
	// Model makes every caller of the model share one partition (what
	// the gateway did before partitions): for tenants that trust each
	// other, and prompts they share (a common system prompt).
	Model
)

// ParseSharing reads a Caddyfile value: principal, team or model.
func ParseSharing(s string) (Sharing, error) {
	switch s {
	case "principal":
		return Principal, nil
	case "team":
		return Team, nil
	case "model":
		return Model, nil
	}
	return 0, fmt.Errorf("cache_sharing: want principal, team or model, got %q", s)
}

func (s Sharing) String() string {
	switch s {
	case Team:
		return "team"
	case Model:
		return "model"
	}
	return "principal"
}

// Partition is one request's cache partition, as its fields: a value on
// the stack, nothing allocated to make one.
type Partition struct {
	kind Sharing
	// provider and subject name a principal (provider "" for llmedge's
	// own users), team a team, model a model.
	provider, subject, team, model string
}

// Of is the partition of a request to model by the principal subject of
// provider (provider "" for the gateway's own users and keys), of team
// ("" for none), under the model's sharing s. A request without a
// principal (the gateway authenticates nobody) is of the model-wide
// partition: there is no tenant to keep apart.
func Of(s Sharing, model, provider, subject, team string) Partition {
	switch {
	case s == Model || subject == "":
		return Partition{kind: Model, model: model}
	case s == Team && team != "":
		return Partition{kind: Team, team: team, model: model}
	}
	return Partition{kind: Principal, provider: provider, subject: subject, model: model}
}

// Shared reports whether p is the model-wide partition.
func (p Partition) Shared() bool { return p.kind == Model }

// MinSecret is the shortest secret Keys accept (bytes).
const MinSecret = 16

// Keys derives partitions' index keys and engine salts from the gateway's
// secret. It is safe for concurrent use.
type Keys struct {
	mac       []byte // the secret, for HMAC
	indexSeed uint64 // seeds index keys: derived, never the secret itself

	mu    sync.RWMutex
	salts map[Partition]string
}

// maxSalts bounds the salts kept: past it the cache starts anew (a salt
// costs one HMAC to make again).
const maxSalts = 4096

// NewKeys returns the keys of secret, which every instance of the
// gateway must share (and nobody else know).
func NewKeys(secret []byte) (*Keys, error) {
	if len(secret) < MinSecret {
		return nil, fmt.Errorf("partition: the cache secret has %d bytes, want at least %d", len(secret), MinSecret)
	}
	k := &Keys{mac: append([]byte(nil), secret...), salts: make(map[Partition]string)}
	seed := k.sum([]byte("llmedge index seed"), Partition{})
	k.indexSeed = binary.LittleEndian.Uint64(seed[:8])
	return k, nil
}

// Index is p's key in the prefix index, which seeds its block hashes: 0
// for the model-wide partition (the index's own seeding, the same as
// before partitions), otherwise a key no other partition has (up to
// 64-bit collisions) and the same on every instance. Nothing allocated.
func (k *Keys) Index(p Partition) uint64 {
	if p.kind == Model {
		return 0
	}
	var d xxhash.Digest
	d.ResetWithSeed(k.indexSeed)
	writeFields(&d, p)
	if h := d.Sum64(); h != 0 {
		return h
	}
	return 1 // 0 is the shared partition's
}

// Salt is p's salt for the engine's prefix cache (vLLM's cache_salt): 43
// characters of base64url, the HMAC-SHA256 of the partition under the
// secret (256 bits, as vLLM asks). Never log it.
func (k *Keys) Salt(p Partition) string {
	k.mu.RLock()
	s, ok := k.salts[p]
	k.mu.RUnlock()
	if ok {
		return s
	}
	sum := k.sum([]byte("llmedge cache_salt"), p)
	s = base64.RawURLEncoding.EncodeToString(sum)
	k.mu.Lock()
	if len(k.salts) >= maxSalts {
		clear(k.salts)
	}
	k.salts[p] = s
	k.mu.Unlock()
	return s
}

// sum is the HMAC-SHA256 of purpose and p's fields.
func (k *Keys) sum(purpose []byte, p Partition) []byte {
	h := hmac.New(sha256.New, k.mac)
	h.Write(purpose)
	h.Write([]byte{0, byte(p.kind)})
	for _, f := range [...]string{p.model, p.provider, p.subject, p.team} {
		// Each field length-prefixed: no two partitions write the same
		// bytes, whatever their names hold.
		var n [4]byte
		binary.LittleEndian.PutUint32(n[:], uint32(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	return h.Sum(nil)
}

// writeFields writes p's fields to d, each length-prefixed.
func writeFields(d *xxhash.Digest, p Partition) {
	var n [5]byte
	n[0] = byte(p.kind)
	_, _ = d.Write(n[:1])
	for _, f := range [...]string{p.model, p.provider, p.subject, p.team} {
		binary.LittleEndian.PutUint32(n[1:], uint32(len(f)))
		_, _ = d.Write(n[1:])
		_, _ = d.WriteString(f)
	}
}
