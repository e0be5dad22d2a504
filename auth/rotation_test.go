package auth

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"
)

func TestAlgorithmsRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, alg := range []string{AlgEdDSA, AlgES256} {
		t.Run(alg, func(t *testing.T) {
			st := newMemStorage()
			ring, err := LoadOrCreateKeyRingAlg(ctx, st, "k", alg)
			if err != nil {
				t.Fatal(err)
			}
			if ring.ActiveAlg() != alg {
				t.Fatalf("active alg %s", ring.ActiveAlg())
			}
			tok, _, err := testIssuer(ring).Issue("alice", []string{"model:qwen"})
			if err != nil {
				t.Fatal(err)
			}
			again, err := LoadKeyRing(ctx, st, "k")
			if err != nil {
				t.Fatal(err)
			}
			if p, err := testVerifier(again).Verify(tok); err != nil || p.Subject != "alice" {
				t.Fatalf("reloaded ring: %v", err)
			}
			var set struct{ Keys []map[string]string }
			b, _ := again.JWKS()
			if err := json.Unmarshal(b, &set); err != nil || len(set.Keys) != 1 || set.Keys[0]["alg"] != alg || set.Keys[0]["kid"] != ring.ActiveKID() {
				t.Fatalf("jwks %s", b)
			}
		})
	}
}

func TestHMACKeyRing(t *testing.T) {
	if _, err := NewHMACKeyRing([]byte("short")); err == nil {
		t.Fatal("short secret accepted")
	}
	secret := []byte("0123456789abcdef0123456789abcdef")
	ring, err := NewHMACKeyRing(secret)
	if err != nil {
		t.Fatal(err)
	}
	tok, _, _ := testIssuer(ring).Issue("bob", nil)
	if _, err := testVerifier(ring).Verify(tok); err != nil {
		t.Fatalf("HS256 token: %v", err)
	}
	if b, _ := ring.JWKS(); string(b) != `{"keys":[]}` {
		t.Fatalf("a shared secret must not be published: %s", b)
	}
	other, _ := NewHMACKeyRing([]byte("another secret, also 32 bytes ok!"))
	if _, err := testVerifier(other).Verify(tok); err == nil {
		t.Fatal("token verified under another secret")
	}
	// Algorithm confusion both ways.
	ed := NewKeyRing(testKey(1))
	if _, err := testVerifier(ed).Verify(tok); err == nil {
		t.Fatal("HS256 token accepted by an EdDSA ring")
	}
	edTok, _, _ := testIssuer(ed).Issue("bob", nil)
	if _, err := testVerifier(ring).Verify(edTok); err == nil {
		t.Fatal("EdDSA token accepted by an HS256 ring")
	}
}

func TestRotation(t *testing.T) {
	ctx := context.Background()
	st := newMemStorage()
	ring, err := LoadOrCreateKeyRing(ctx, st, "k")
	if err != nil {
		t.Fatal(err)
	}
	oldTok, _, _ := testIssuer(ring).Issue("alice", nil)
	oldKID := ring.ActiveKID()

	rotated, err := RotateKeyRing(ctx, st, "k", AlgES256, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ring.Replace(rotated)
	if ring.ActiveKID() == oldKID || ring.ActiveAlg() != AlgES256 {
		t.Fatal("rotation did not change the active key")
	}
	if kids := ring.KIDs(); len(kids) != 2 || kids[1] != oldKID {
		t.Fatalf("kids after rotation %v", kids)
	}
	newTok, _, _ := testIssuer(ring).Issue("alice", nil)
	for name, tok := range map[string]string{"old": oldTok, "new": newTok} {
		if _, err := testVerifier(ring).Verify(tok); err != nil {
			t.Fatalf("%s token after rotation: %v", name, err)
		}
	}
	// Another instance sharing the storage sees the same ring.
	peer, err := LoadKeyRing(ctx, st, "k")
	if err != nil || peer.ActiveKID() != ring.ActiveKID() || len(peer.KIDs()) != 2 {
		t.Fatalf("peer ring: %v %v", err, peer)
	}
	// Past its not_after the retired key no longer verifies, and the next
	// rotation prunes it from storage.
	time.Sleep(400 * time.Millisecond)
	later, err := LoadKeyRing(ctx, st, "k")
	if err != nil || len(later.KIDs()) != 1 {
		t.Fatalf("expired key still loaded: %v %v", err, later.KIDs())
	}
	if _, err := testVerifier(later).Verify(oldTok); err == nil {
		t.Fatal("token of an expired key still verifies")
	}
	if _, err := RotateKeyRing(ctx, st, "k", AlgEdDSA, time.Hour); err != nil {
		t.Fatal(err)
	}
	var f keyFile
	if err := json.Unmarshal(st.data["k"], &f); err != nil || len(f.Keys) != 2 {
		t.Fatalf("stored after pruning: %s", st.data["k"])
	}
	for _, k := range f.Keys {
		if k.KID == oldKID {
			t.Fatal("expired key not pruned")
		}
		if k.KID != f.Active && k.PrivateKey != "" {
			t.Fatal("a retired key kept its private key")
		}
	}
}

func TestRotateIfOlderRotatesOnce(t *testing.T) {
	ctx := context.Background()
	st := newMemStorage()
	first, _ := LoadOrCreateKeyRing(ctx, st, "k")
	if _, rotated, err := RotateKeyRingIfOlder(ctx, st, "k", AlgEdDSA, time.Hour, time.Hour); err != nil || rotated {
		t.Fatalf("young key rotated: %v %v", rotated, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	count := 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, rotated, err := RotateKeyRingIfOlder(ctx, st, "k", AlgEdDSA, time.Nanosecond, time.Hour)
			if err != nil {
				t.Error(err)
			}
			if rotated {
				mu.Lock()
				count++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// Each caller sees a key older than 1ns unless it was just made, so
	// rotations happen one at a time under the lock, never concurrently:
	// the file stays consistent and parses.
	ring, err := LoadKeyRing(ctx, st, "k")
	if err != nil || count == 0 || ring.ActiveKID() == first.ActiveKID() {
		t.Fatalf("rotations %d, err %v", count, err)
	}
	// An algorithm change rotates even a young key.
	if _, rotated, _ := RotateKeyRingIfOlder(ctx, st, "k", AlgES256, time.Hour, time.Hour); !rotated {
		t.Fatal("algorithm change did not rotate")
	}
}
