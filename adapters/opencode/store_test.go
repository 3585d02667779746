package opencode

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

func TestStoreEvictsTheLeastRecentlyUpdatedSessions(t *testing.T) {
	ctx := context.Background()
	s, err := OpenStore(ctx, StoreOptions{MaxBytes: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var emu sync.Mutex
	var evicted []string
	s.mu.Lock()
	s.onEvict = func(ids []string) {
		emu.Lock()
		evicted = append(evicted, ids...)
		emu.Unlock()
	}
	s.mu.Unlock()
	s.mu.Lock()
	s.busy = func(id string) bool { return id == "ses_000" } // the oldest runs a turn
	s.mu.Unlock()
	big := []byte(`{"text":"` + strings.Repeat("x", 64<<10) + `"}`)
	for i := range 200 {
		id := fmt.Sprintf("ses_%03d", i)
		if err := s.putSession(ctx, id, storedSession{Agent: "a", Directory: "/", Updated: int64(i), Info: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if err := s.putPart(ctx, id, "msg_1", "prt_1", big); err != nil {
			t.Fatal(err)
		}
		s.enforce(ctx) // as the background goroutine does when kicked
	}
	emu.Lock()
	defer emu.Unlock()
	used, err := s.usedBytes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if used > 4<<20 {
		t.Errorf("%d bytes in use, bound 4 MiB", used)
	}
	if len(evicted) == 0 {
		t.Fatal("nothing evicted")
	}
	if _, err := s.session(ctx, "ses_000"); err != nil {
		t.Errorf("the busy session was evicted: %v", err)
	}
	if _, err := s.session(ctx, "ses_001"); err == nil {
		t.Error("the least recently updated idle session is still there")
	}
	if _, err := s.session(ctx, "ses_199"); err != nil {
		t.Errorf("the newest session is gone: %v", err)
	}
	for _, id := range evicted {
		if m, _ := s.messages(ctx, id, 0, nil); len(m) != 0 {
			t.Errorf("messages of evicted %s remain", id)
		}
	}
}

func TestStoreRetention(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_000_000, 0)
	s, err := OpenStore(ctx, StoreOptions{Retention: time.Hour, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for id, age := range map[string]time.Duration{"ses_old": 2 * time.Hour, "ses_new": time.Minute} {
		if err := s.putSession(ctx, id, storedSession{Agent: "a", Directory: "/", Updated: now.Add(-age).UnixMilli(), Info: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.enforce(ctx); len(got) != 1 || got[0] != "ses_old" {
		t.Errorf("evicted %v, want [ses_old]", got)
	}
}

func TestStoreRefusesANewerSchema(t *testing.T) {
	ctx := context.Background()
	path := tempDB(t)
	s, err := OpenStore(ctx, StoreOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.ExecContext(ctx, "PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := OpenStore(ctx, StoreOptions{Path: path}); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("opening a newer schema: %v", err)
	}
}

func TestStoreHardStop(t *testing.T) {
	// One session alone (never evicted while busy) cannot grow the file
	// past the hard stop a quarter above the bound.
	ctx := context.Background()
	s, err := OpenStore(ctx, StoreOptions{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.mu.Lock()
	s.busy = func(string) bool { return true }
	s.mu.Unlock()
	big := []byte(strings.Repeat("y", 32<<10))
	var failed error
	for i := range 100 {
		if err := s.putPart(ctx, "ses_1", "msg_1", fmt.Sprintf("prt_%03d", i), big); err != nil {
			failed = err
			break
		}
	}
	if failed == nil {
		t.Fatal("3 MiB went into a 1 MiB store")
	}
	var pages, size int64
	_ = s.db.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages)
	_ = s.db.QueryRowContext(ctx, "PRAGMA page_size").Scan(&size)
	if pages*size > 2<<20 {
		t.Errorf("file grew to %d bytes", pages*size)
	}
}

// The database and its -wal and -shm files are the owner's only: the WAL
// holds the latest prompts and answers as they are written. SQLite makes
// them with 0644 less the umask (the -wal and -shm with the database's
// mode), so they used to be readable by every local user where the
// directory is; a database left readable (an older daemon, a copy) is
// made private again, its WAL included.
func TestStoreFileIsPrivate(t *testing.T) {
	for _, existing := range []bool{false, true} {
		path := tempDB(t)
		if existing {
			for _, p := range []string{path, path + "-wal", path + "-shm"} {
				if err := os.WriteFile(p, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				os.Chmod(p, 0o644) // whatever the umask
			}
		}
		s, err := OpenStore(context.Background(), StoreOptions{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.putSession(context.Background(), "ses_1", storedSession{Agent: "mock", Directory: "/", Info: []byte(`{"id":"ses_1"}`)}); err != nil {
			t.Fatal(err)
		}
		db, _ := sql.Open("sqlite", "file:"+path)
		var mode string
		if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
			t.Errorf("journal mode %q (%v), want wal", mode, err)
		}
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			if fi, err := statMode(p); err != nil || fi&0o077 != 0 {
				t.Errorf("existing %v: %s mode %o (%v): the database holds every prompt", existing, filepath.Base(p), fi, err)
			}
		}
		db.Close()
		s.Close()
	}
}

// A write the full database refuses is insufficient_storage, saying so,
// not a bare driver error (a 500 "internal error" on the wire).
func TestStoreFullIsInsufficientStorage(t *testing.T) {
	ctx := context.Background()
	s, err := OpenStore(ctx, StoreOptions{MaxBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.mu.Lock()
	s.busy = func(string) bool { return true }
	s.mu.Unlock()
	big := []byte(strings.Repeat("y", 32<<10))
	for i := range 100 {
		err = s.putPart(ctx, "ses_1", "msg_1", fmt.Sprintf("prt_%03d", i), big)
		if err != nil {
			break
		}
	}
	if !domain.IsKind(err, domain.KindInsufficientStorage) || !strings.Contains(err.Error(), "sessions database is full") {
		t.Fatalf("a write past the hard stop: %v", err)
	}
	if kindStatus(domain.KindInsufficientStorage) != 507 {
		t.Fatal("not 507")
	}
	if err := storeError(errors.New("other")); domain.IsKind(err, domain.KindInsufficientStorage) {
		t.Fatal("any error taken for a full database")
	}
}
