package llmapp

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/caddyserver/certmagic"
)

// TestDryStorage: while validating, the app's storage reads what is there
// and writes nothing to it.
func TestDryStorage(t *testing.T) {
	dir := t.TempDir()
	under := &certmagic.FileStorage{Path: dir}
	ctx := context.Background()
	if err := under.Store(ctx, "llmedge/kept", []byte("old")); err != nil {
		t.Fatal(err)
	}
	a := &App{}
	validating.Store(true)
	defer validating.Store(false)
	s := a.storage(under)
	if a.storage(under) != s {
		t.Fatal("one dry layer per app")
	}
	if b, err := s.Load(ctx, "llmedge/kept"); err != nil || string(b) != "old" {
		t.Fatalf("read through: %q %v", b, err)
	}
	_ = s.Lock(ctx, "x")
	if err := s.Store(ctx, "llmedge/new", []byte("n")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "llmedge/kept"); err != nil {
		t.Fatal(err)
	}
	if b, err := s.Load(ctx, "llmedge/new"); err != nil || string(b) != "n" || !s.Exists(ctx, "llmedge/new") {
		t.Fatalf("its own write: %q %v", b, err)
	}
	if _, err := s.Load(ctx, "llmedge/kept"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("its own delete: %v", err)
	}
	if keys, err := s.List(ctx, "llmedge", false); err != nil || len(keys) != 1 || keys[0] != "llmedge/new" {
		t.Fatalf("list: %v %v", keys, err)
	}
	// Underneath, nothing changed: no new key, no lock file, the old key.
	var files []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, rel)
		}
		return nil
	})
	if len(files) != 1 || files[0] != filepath.Join("llmedge", "kept") {
		t.Fatalf("files under the storage: %v", files)
	}
	validating.Store(false)
	if (&App{}).storage(under) != certmagic.Storage(under) {
		t.Fatal("not validating: the storage itself")
	}
}

func TestDefaultLedgerPath(t *testing.T) {
	if got, want := DefaultLedgerPath(&certmagic.FileStorage{Path: "/srv/a"}), filepath.Join("/srv/a", "llmedge", "ledger.db"); got != want {
		t.Errorf("under a file storage: %s, want %s", got, want)
	}
	if got := DefaultLedgerPath(nil); filepath.Base(filepath.Dir(got)) != "llmedge" || filepath.Dir(filepath.Dir(got)) == "/srv/a" {
		t.Errorf("without one: %s", got)
	}
}
