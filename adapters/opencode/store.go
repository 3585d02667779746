package opencode

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

// Store keeps OpenCode's sessions, messages, parts and todo lists in an
// embedded SQLite database (modernc.org/sqlite: SQLite translated to Go,
// no cgo; docs/opencode.md), so the sessions a client sees survive a
// daemon restart. What it stores is the OpenCode JSON of each object, so
// a listing is the stored bytes.
//
// It is bounded two ways: sessions not updated for longer than Retention
// are deleted, and when the pages in use pass MaxBytes the least recently
// updated sessions are deleted until they take 90 % of it. SQLite reuses
// the pages freed, so the file stays near MaxBytes. A session that is
// running a turn is never evicted.
//
// One connection serves everything (SQLite has one writer anyway, and an
// in-memory database exists per connection); each call is one statement
// or one short transaction.
type Store struct {
	opts      StoreOptions
	openOnce  sync.Once
	openErr   error
	db        *sql.DB // set by ready; nil until then
	stmts     stmts   // the hot statements, prepared once (set by ready)
	maxBytes  int64
	retention time.Duration
	now       func() time.Time

	// Enforcing the bounds is one background goroutine's (run), kicked
	// every checkEvery bytes written: a write never waits for eviction,
	// and eviction asks busy (which locks sessions) holding no lock of a
	// writer's.
	kick      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	stopped   chan struct{}

	mu           sync.Mutex // guards what follows
	sinceCheck   int64      // bytes written since the last size check
	checkEvery   int64
	onEvict      func(ids []string) // told which sessions eviction deleted
	busy         func(id string) bool
	lastEvictErr error
}

// StoreOptions configure OpenStore.
type StoreOptions struct {
	// Path is the database file; "" keeps it in memory (tests).
	Path string
	// MaxBytes bounds the pages in use (default 512 MiB).
	MaxBytes int64
	// Retention deletes sessions not updated for this long; 0 keeps them
	// until the size bound needs their room.
	Retention time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Fallback, when set, keeps the store in memory if the file cannot be
	// opened, and is told why (the daemon's default file: a read-only home
	// must not stop the daemon).
	Fallback func(error)
}

// DefaultStoreMaxBytes is StoreOptions.MaxBytes's default.
const DefaultStoreMaxBytes = 512 << 20

// schemaVersion is PRAGMA user_version of the current schema.
const schemaVersion = 1

const schema = `
CREATE TABLE IF NOT EXISTS sessions (
	id TEXT PRIMARY KEY,
	agent TEXT NOT NULL,
	acp_session TEXT NOT NULL DEFAULT '',
	directory TEXT NOT NULL,
	updated INTEGER NOT NULL,
	info BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS sessions_updated ON sessions(updated);
CREATE TABLE IF NOT EXISTS messages (
	session_id TEXT NOT NULL,
	id TEXT NOT NULL,
	info BLOB NOT NULL,
	PRIMARY KEY (session_id, id)
);
CREATE TABLE IF NOT EXISTS parts (
	session_id TEXT NOT NULL,
	message_id TEXT NOT NULL,
	id TEXT NOT NULL,
	data BLOB NOT NULL,
	PRIMARY KEY (session_id, message_id, id)
);
CREATE TABLE IF NOT EXISTS todos (
	session_id TEXT PRIMARY KEY,
	data BLOB NOT NULL
);
`

// stmts are the statements run at every event, prepared once: SQLite
// spends as long parsing a statement as running it.
type stmts struct {
	putSession, session, putMessage, hasMessage, putPart, putTodos *sql.Stmt
}

const (
	sqlPutSession = `INSERT INTO sessions(id, agent, acp_session, directory, updated, info) VALUES(?,?,?,?,?,?)
		ON CONFLICT(id) DO UPDATE SET agent=excluded.agent, acp_session=excluded.acp_session,
		directory=excluded.directory, updated=excluded.updated, info=excluded.info`
	sqlSession    = "SELECT agent, acp_session, directory, updated, info FROM sessions WHERE id = ?"
	sqlPutMessage = `INSERT INTO messages(session_id, id, info) VALUES(?,?,?)
		ON CONFLICT(session_id, id) DO UPDATE SET info=excluded.info`
	sqlHasMessage = "SELECT count(*) FROM messages WHERE session_id = ? AND id = ?"
	sqlPutPart    = `INSERT INTO parts(session_id, message_id, id, data) VALUES(?,?,?,?)
		ON CONFLICT(session_id, message_id, id) DO UPDATE SET data=excluded.data`
	sqlPutTodos = `INSERT INTO todos(session_id, data) VALUES(?,?)
		ON CONFLICT(session_id) DO UPDATE SET data=excluded.data`
)

func prepare(ctx context.Context, db *sql.DB) (stmts, error) {
	var st stmts
	for _, p := range []struct {
		dst **sql.Stmt
		q   string
	}{
		{&st.putSession, sqlPutSession}, {&st.session, sqlSession}, {&st.putMessage, sqlPutMessage},
		{&st.hasMessage, sqlHasMessage}, {&st.putPart, sqlPutPart}, {&st.putTodos, sqlPutTodos},
	} {
		var err error
		if *p.dst, err = db.PrepareContext(ctx, p.q); err != nil {
			return st, fmt.Errorf("prepare opencode statements: %w", err)
		}
	}
	return st, nil
}

// NewStore returns a store that opens its database when first used, so a
// daemon no OpenCode client talks to writes no file.
func NewStore(opts StoreOptions) *Store {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultStoreMaxBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{opts: opts, maxBytes: opts.MaxBytes, retention: opts.Retention, now: opts.Now, checkEvery: min(opts.MaxBytes/64, 4<<20),
		kick: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
}

// OpenStore opens (creating if needed) the database at opts.Path now.
func OpenStore(ctx context.Context, opts StoreOptions) (*Store, error) {
	s := NewStore(opts)
	if err := s.ready(); err != nil {
		return nil, err
	}
	return s, nil
}

// ready opens the database once, and starts the eviction goroutine.
func (s *Store) ready() error {
	s.openOnce.Do(func() {
		select {
		case <-s.done:
			s.openErr = errors.New("the opencode database is closed")
			return
		default:
		}
		db, err := openDB(dbctx, s.opts.Path, s.opts.MaxBytes)
		if err != nil && s.opts.Path != "" && s.opts.Fallback != nil {
			s.opts.Fallback(err)
			db, err = openDB(dbctx, "", s.opts.MaxBytes)
		}
		if err == nil {
			if s.stmts, err = prepare(dbctx, db); err != nil {
				db.Close()
			}
		}
		if err != nil {
			s.openErr = err
			return
		}
		s.db = db
		go s.run()
	})
	return s.openErr
}

func openDB(ctx context.Context, path string, maxBytes int64) (*sql.DB, error) {
	dsn := "file::memory:"
	if path != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("opencode database directory: %w", err)
		}
		if err := ownerOnly(path); err != nil {
			return nil, fmt.Errorf("open opencode database: %w", err)
		}
		dsn = "file:" + (&url.URL{Path: path}).EscapedPath()
	}
	// WAL: a commit appends to the log without rewriting pages; NORMAL
	// syncs at checkpoints, not at every commit (a power cut may lose the
	// last events, never corrupt the file).
	dsn += "?_pragma=journal_mode(wal)&_pragma=synchronous(normal)&_pragma=busy_timeout(5000)&_txlock=immediate"
	// A hard stop a quarter past the bound (in pages of SQLite's default
	// 4 KiB): eviction keeps the pages in use under MaxBytes but never
	// deletes a session running a turn, so one session alone cannot grow
	// the file without end either. Writes past it fail, and are logged.
	dsn += fmt.Sprintf("&_pragma=max_page_count(%d)", maxBytes*5/4/4096+64)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open opencode database: %w", err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// ownerOnly makes the database file, or makes it private if it exists,
// before SQLite opens it: the database holds every prompt and answer.
// SQLite would make it 0644 less the umask, and gives its -wal (the latest
// writes) and -shm files the database's mode when it makes them; a chmod
// after opening came too late for those, and for any reader that opened
// the file meanwhile. A -wal or -shm left by a daemon that was killed is
// made private too.
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	err = f.Chmod(0o600)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	for _, p := range []string{path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func migrate(ctx context.Context, db *sql.DB) error {
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("open opencode database: %w", err)
	}
	if v > schemaVersion {
		return fmt.Errorf("the opencode database was written by a newer sandbox-agent (schema %d, this one knows %d)", v, schemaVersion)
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("create opencode database: %w", err)
	}
	if _, err := db.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
		return fmt.Errorf("create opencode database: %w", err)
	}
	return nil
}

// Close stops the eviction goroutine and closes the database (if it was
// ever opened). It is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.done) })
	s.openOnce.Do(func() { s.openErr = errors.New("the opencode database is closed") })
	if s.db == nil {
		return nil
	}
	<-s.stopped
	return s.db.Close()
}

// run enforces the bounds when kicked, until Close.
func (s *Store) run() {
	defer close(s.stopped)
	for {
		select {
		case <-s.kick:
			s.enforce(dbctx)
		case <-s.done:
			return
		}
	}
}

// storedSession is a sessions row.
type storedSession struct {
	Agent      string
	ACPSession string
	Directory  string
	Updated    int64
	Info       []byte
}

var errNoSession = errors.New("session not found")

// putSession inserts or replaces a session's row.
func (s *Store) putSession(ctx context.Context, id string, r storedSession) error {
	if err := s.ready(); err != nil {
		return err
	}
	_, err := s.stmts.putSession.ExecContext(ctx, id, r.Agent, r.ACPSession, r.Directory, r.Updated, r.Info)
	s.wrote(ctx, len(r.Info))
	return storeError(err)
}

// session reads one session's row (errNoSession if there is none).
func (s *Store) session(ctx context.Context, id string) (storedSession, error) {
	if err := s.ready(); err != nil {
		return storedSession{}, err
	}
	var r storedSession
	err := s.stmts.session.QueryRowContext(ctx, id).Scan(&r.Agent, &r.ACPSession, &r.Directory, &r.Updated, &r.Info)
	if errors.Is(err, sql.ErrNoRows) {
		return r, errNoSession
	}
	return r, err
}

// sessionQuery filters listSessions.
type sessionQuery struct {
	Directory string // only sessions of this directory ("" any)
	Start     int64  // only sessions updated at or after this time (ms)
	Search    string // title contains this (case-insensitive)
	Limit     int    // at most this many (0: no limit)
	// Take, when set, is asked for every row's bytes before it is kept;
	// false ends the listing with errListTooLarge (the caller's memory
	// budget).
	Take func(n int) bool
}

// errListTooLarge ends a listing its caller's budget has no room for.
var errListTooLarge = errors.New("the listing does not fit the memory budget")

// listSessions returns sessions' info, most recently updated first.
func (s *Store) listSessions(ctx context.Context, q sessionQuery) ([][]byte, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	query := "SELECT info FROM sessions WHERE updated >= ?"
	args := []any{q.Start}
	if q.Directory != "" {
		query += " AND directory = ?"
		args = append(args, q.Directory)
	}
	if q.Search != "" {
		query += " AND instr(lower(json_extract(info, '$.title')), ?) > 0"
		args = append(args, strings.ToLower(q.Search))
	}
	query += " ORDER BY updated DESC, id"
	if q.Limit > 0 {
		query += " LIMIT ?"
		args = append(args, q.Limit)
	}
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]byte
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		if q.Take != nil && !q.Take(len(b)) {
			return nil, errListTooLarge
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// deleteSession deletes a session with its messages, parts and todos.
func (s *Store) deleteSession(ctx context.Context, id string) error {
	return s.deleteSessions(ctx, []string{id})
}

func (s *Store) deleteSessions(ctx context.Context, ids []string) error {
	if err := s.ready(); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
	for _, id := range ids {
		for _, q := range []string{
			"DELETE FROM parts WHERE session_id = ?",
			"DELETE FROM messages WHERE session_id = ?",
			"DELETE FROM todos WHERE session_id = ?",
			"DELETE FROM sessions WHERE id = ?",
		} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return storeError(err)
			}
		}
	}
	return storeError(tx.Commit())
}

// storeError is a failed write as the client is told it: a database that
// is full, because its disk is or because it reached its hard stop, is
// insufficient_storage (507, saying so); it was a 500 "internal error",
// and the database's "database or disk is full" only in the log.
func storeError(err error) error {
	var se interface{ Code() int }
	if errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_FULL {
		return domain.InsufficientStorage(0, "%s", errStoreFull).Because(err)
	}
	return err
}

// errStoreFull is the message of a full sessions database.
const errStoreFull = "the OpenCode sessions database is full: its disk has no space left, or it reached its hard stop (a quarter past --opencode-max-db)"

// putMessage inserts or replaces a message's info.
func (s *Store) putMessage(ctx context.Context, sessionID, id string, info []byte) error {
	if err := s.ready(); err != nil {
		return err
	}
	_, err := s.stmts.putMessage.ExecContext(ctx, sessionID, id, info)
	s.wrote(ctx, len(info))
	return storeError(err)
}

// hasMessage reports whether a session has a message of this id.
func (s *Store) hasMessage(ctx context.Context, sessionID, id string) (bool, error) {
	if err := s.ready(); err != nil {
		return false, err
	}
	var n int
	err := s.stmts.hasMessage.QueryRowContext(ctx, sessionID, id).Scan(&n)
	return n > 0, err
}

// putPart inserts or replaces a part.
func (s *Store) putPart(ctx context.Context, sessionID, messageID, id string, data []byte) error {
	if err := s.ready(); err != nil {
		return err
	}
	_, err := s.stmts.putPart.ExecContext(ctx, sessionID, messageID, id, data)
	s.wrote(ctx, len(data))
	return storeError(err)
}

// storedMessage is a message with its parts, in id order.
type storedMessage struct {
	ID    string
	Info  []byte
	Parts [][]byte
}

// messages returns a session's messages in the order they were made
// (oldest first), each with its parts in theirs: the last limit messages
// when limit > 0. The order is the rows' (rowid), not the ids': a client
// may choose ids of its own.
//
// take, when not nil, is asked for every row's bytes before it is kept;
// false ends the listing with errListTooLarge.
func (s *Store) messages(ctx context.Context, sessionID string, limit int, take func(int) bool) ([]storedMessage, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = -1 // no LIMIT
	}
	rows, err := s.db.QueryContext(ctx, "SELECT id, info FROM messages WHERE session_id = ? ORDER BY rowid DESC LIMIT ?", sessionID, limit)
	if err != nil {
		return nil, err
	}
	var out []storedMessage
	for rows.Next() {
		var m storedMessage
		if err := rows.Scan(&m.ID, &m.Info); err != nil {
			rows.Close()
			return nil, err
		}
		if take != nil && !take(len(m.Info)) {
			rows.Close()
			return nil, errListTooLarge
		}
		out = append(out, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	if len(out) == 0 {
		return out, nil
	}
	index := make(map[string]int, len(out))
	for i, m := range out {
		index[m.ID] = i
	}
	prows, err := s.db.QueryContext(ctx, `SELECT message_id, data FROM parts WHERE session_id = ? AND message_id IN
		(SELECT id FROM messages WHERE session_id = ? ORDER BY rowid DESC LIMIT ?) ORDER BY rowid`, sessionID, sessionID, limit)
	if err != nil {
		return nil, err
	}
	defer prows.Close()
	for prows.Next() {
		var mid string
		var data []byte
		if err := prows.Scan(&mid, &data); err != nil {
			return nil, err
		}
		if take != nil && !take(len(data)) {
			return nil, errListTooLarge
		}
		if i, ok := index[mid]; ok {
			out[i].Parts = append(out[i].Parts, data)
		}
	}
	return out, prows.Err()
}

// message returns one message with its parts.
func (s *Store) message(ctx context.Context, sessionID, id string) (storedMessage, bool, error) {
	if err := s.ready(); err != nil {
		return storedMessage{ID: id}, false, err
	}
	m := storedMessage{ID: id}
	err := s.db.QueryRowContext(ctx, "SELECT info FROM messages WHERE session_id = ? AND id = ?", sessionID, id).Scan(&m.Info)
	if errors.Is(err, sql.ErrNoRows) {
		return m, false, nil
	}
	if err != nil {
		return m, false, err
	}
	rows, err := s.db.QueryContext(ctx, "SELECT data FROM parts WHERE session_id = ? AND message_id = ? ORDER BY rowid", sessionID, id)
	if err != nil {
		return m, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			return m, false, err
		}
		m.Parts = append(m.Parts, data)
	}
	return m, true, rows.Err()
}

// putTodos replaces a session's todo list.
func (s *Store) putTodos(ctx context.Context, sessionID string, data []byte) error {
	if err := s.ready(); err != nil {
		return err
	}
	_, err := s.stmts.putTodos.ExecContext(ctx, sessionID, data)
	s.wrote(ctx, len(data))
	return storeError(err)
}

// todos returns a session's todo list (nil when it has none).
func (s *Store) todos(ctx context.Context, sessionID string) ([]byte, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	var b []byte
	err := s.db.QueryRowContext(ctx, "SELECT data FROM todos WHERE session_id = ?", sessionID).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return b, err
}

// usedBytes is the size of the pages in use (the file less its free
// pages).
func (s *Store) usedBytes(ctx context.Context) (int64, error) {
	if err := s.ready(); err != nil {
		return 0, err
	}
	var pages, free, size int64
	if err := s.db.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		return 0, err
	}
	if err := s.db.QueryRowContext(ctx, "PRAGMA freelist_count").Scan(&free); err != nil {
		return 0, err
	}
	if err := s.db.QueryRowContext(ctx, "PRAGMA page_size").Scan(&size); err != nil {
		return 0, err
	}
	return (pages - free) * size, nil
}

// wrote counts n bytes written and, every checkEvery bytes, has the
// bounds enforced (in the background).
func (s *Store) wrote(_ context.Context, n int) {
	s.mu.Lock()
	s.sinceCheck += int64(n)
	due := s.sinceCheck >= s.checkEvery
	if due {
		s.sinceCheck = 0
	}
	s.mu.Unlock()
	if due {
		s.kickEnforce()
	}
}

// kickEnforce asks the background goroutine to enforce the bounds.
func (s *Store) kickEnforce() {
	select {
	case s.kick <- struct{}{}:
	default: // already asked
	}
}

// enforce deletes sessions past the retention period, then the least
// recently updated ones while the pages in use pass MaxBytes, down to 90 %
// of it. Sessions busy (a turn running) are kept.
func (s *Store) enforce(ctx context.Context) []string {
	s.mu.Lock()
	busy, onEvict := s.busy, s.onEvict
	s.mu.Unlock()
	var evicted []string
	if s.retention > 0 {
		cutoff := s.now().Add(-s.retention).UnixMilli()
		ids, err := s.sessionIDs(ctx, "SELECT id FROM sessions WHERE updated < ? ORDER BY updated", cutoff)
		if err == nil {
			ids = keep(ids, busy)
			if err := s.deleteSessions(ctx, ids); err == nil {
				evicted = append(evicted, ids...)
			}
		}
	}
	used, err := s.usedBytes(ctx)
	if err == nil && used > s.maxBytes {
		for err == nil && used > s.maxBytes*9/10 {
			var ids []string
			ids, err = s.sessionIDs(ctx, "SELECT id FROM sessions ORDER BY updated, id LIMIT 64")
			ids = keep(ids, busy)
			if err != nil || len(ids) == 0 {
				break
			}
			if err = s.deleteSession(ctx, ids[0]); err != nil {
				break
			}
			evicted = append(evicted, ids[0])
			used, err = s.usedBytes(ctx)
		}
	}
	s.mu.Lock()
	s.lastEvictErr = err
	s.mu.Unlock()
	if len(evicted) > 0 && onEvict != nil {
		onEvict(evicted)
	}
	return evicted
}

func keep(ids []string, busy func(string) bool) []string {
	if busy == nil {
		return ids
	}
	out := ids[:0]
	for _, id := range ids {
		if !busy(id) {
			out = append(out, id)
		}
	}
	return out
}

func (s *Store) sessionIDs(ctx context.Context, q string, args ...any) ([]string, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// dbctx is the context of the adapter's writes: each is short, and none
// is given up when a request or the adapter ends, so what a turn did is
// recorded even while the daemon stops.
var dbctx = context.Background()
