package sqlschema

import (
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver, "sqlite"
)

// OpenSQLite opens the SQLite file at path, creating it and its folder if
// need be, as the stores share it: in WAL mode, so that readers do not
// block the writer; waiting up to 5 s on the file's lock rather than
// failing; with one connection, since SQLite has one writer anyway and a
// single connection makes every write wait its turn here rather than on
// the lock. immediate makes each transaction take the write lock as it
// begins, for a store whose transactions all write: two writers then
// wait rather than fail when one upgrades its read.
func OpenSQLite(path string, immediate bool) (*sql.DB, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", dir, err)
		}
	}
	q := url.Values{"_pragma": {"busy_timeout(5000)", "journal_mode(WAL)", "synchronous(NORMAL)"}}
	if immediate {
		q.Set("_txlock", "immediate")
	}
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}
