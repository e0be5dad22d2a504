package auth

import (
	"slices"
	"testing"
	"time"
)

// TestNoUserEnumerationByTiming compares, as distributions, how long a
// wrong password and an unknown user take: an attacker must not be able
// to tell which names exist. Samples are interleaved so machine load hits
// both alike; medians and quartiles must agree within a wide margin (an
// unknown user answered without a bcrypt comparison would be ~1000x
// faster, which is what this catches).
func TestNoUserEnumerationByTiming(t *testing.T) {
	if testing.Short() {
		t.Skip("timing comparison")
	}
	hash, err := HashPasswordCost(testPW, 8)
	if err != nil {
		t.Fatal(err)
	}
	users, err := NewUsers([]User{{Name: "alice", PasswordHash: hash}, {Name: "bob", PasswordHash: hash, Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	const n = 25
	var wrong, unknown, disabled []time.Duration
	measure := func(name, pw string) time.Duration {
		start := time.Now()
		if _, err := users.Authenticate(name, pw); err == nil {
			t.Fatal("authenticated")
		}
		return time.Since(start)
	}
	for i := 0; i < n; i++ {
		wrong = append(wrong, measure("alice", "nope"))
		unknown = append(unknown, measure("mallory", "nope"))
		disabled = append(disabled, measure("bob", testPW))
	}
	q := func(d []time.Duration, p int) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)*p/100]
	}
	for _, other := range []struct {
		name string
		d    []time.Duration
	}{{"unknown user", unknown}, {"disabled user", disabled}} {
		for _, p := range []int{25, 50, 75} {
			a, b := q(wrong, p), q(other.d, p)
			if ratio := float64(b) / float64(a); ratio < 0.5 || ratio > 2 {
				t.Errorf("p%d: wrong password %v, %s %v (ratio %.2f)", p, a, other.name, b, ratio)
			}
		}
	}
}
