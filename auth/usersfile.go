package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// WatchUsersFile polls path every interval and, when its size or
// modification time changes, loads it and passes the users to apply. A
// file that does not load is reported to onError and the users stay as
// they were. It returns when ctx ends.
//
// The first check always loads the file: a change made between the
// caller's own load and the watcher's start is not missed.
func WatchUsersFile(ctx context.Context, path string, interval time.Duration, apply func([]User) error, onError func(error)) {
	last := stamp{size: -2} // unknown: differs from every real stamp
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		stamp := fileStamp(path)
		if stamp == last {
			continue
		}
		last = stamp
		users, err := LoadUsersFile(path)
		if err == nil {
			err = apply(users)
		}
		if err != nil {
			onError(err)
		}
	}
}

type stamp struct {
	size int64
	mod  time.Time
}

func fileStamp(path string) stamp {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{size: -1}
	}
	return stamp{fi.Size(), fi.ModTime()}
}

// AddUserToFile adds user to the users file at path (creating it), or
// replaces the user of the same name. The file is written atomically with
// mode 0600, so a gateway watching it never reads half a file.
func AddUserToFile(path string, user User) error {
	if user.Name == "" {
		return errors.New("the user has no name")
	}
	var f struct {
		Users []User `json:"users"`
	}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	default:
		if _, err := LoadUsersFile(path); err != nil {
			return err
		}
		if err := json.Unmarshal(b, &f); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	replaced := false
	for i := range f.Users {
		if f.Users[i].Name == user.Name {
			f.Users[i], replaced = user, true
		}
	}
	if !replaced {
		f.Users = append(f.Users, user)
	}
	if _, err := NewUsers(f.Users); err != nil {
		return err
	}
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".users-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(out, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
