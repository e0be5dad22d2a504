package keep

import (
	"errors"
	"testing"
)

type counter struct{ destructed *int }

func (c counter) Destruct() error { *c.destructed++; return nil }

func TestShareAndDestruct(t *testing.T) {
	s := New()
	made, destructed := 0, 0
	mk := func() (any, error) { made++; return counter{&destructed}, nil }

	v1, loaded, err := s.LoadOrNew("k", mk)
	if err != nil || loaded || made != 1 {
		t.Fatalf("first: loaded %v, made %d, err %v", loaded, made, err)
	}
	v2, loaded, _ := s.LoadOrNew("k", mk) // the next configuration, overlapping
	if !loaded || made != 1 || v1 != v2 {
		t.Fatalf("second: loaded %v, made %d, same %v", loaded, made, v1 == v2)
	}
	if deleted, _ := s.Delete("k"); deleted || destructed != 0 || s.Refs("k") != 1 {
		t.Fatalf("old configuration ends: deleted %v, destructed %d, refs %d", deleted, destructed, s.Refs("k"))
	}
	if deleted, _ := s.Delete("k"); !deleted || destructed != 1 || len(s.Keys()) != 0 {
		t.Fatalf("last user ends: deleted %v, destructed %d, keys %v", deleted, destructed, s.Keys())
	}
	if deleted, err := s.Delete("k"); deleted || err != nil {
		t.Fatalf("a key not held: %v %v", deleted, err)
	}
}

func TestFailedConstructKeepsNothing(t *testing.T) {
	s := New()
	if _, _, err := s.LoadOrNew("k", func() (any, error) { return nil, errors.New("no") }); err == nil {
		t.Fatal("want the constructor's error")
	}
	if len(s.Keys()) != 0 {
		t.Fatalf("kept %v", s.Keys())
	}
	if _, ok := s.Load("k"); ok {
		t.Fatal("Load found a failed value")
	}
}
