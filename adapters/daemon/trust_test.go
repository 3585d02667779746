//go:build linux

package daemon

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// A state directory another user can write is refused: whoever writes
// there can plant a record that makes stop signal any process of ours.
func TestStateDirOthersCanWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := New(Config{StateDir: dir, Host: "127.0.0.1", Port: 2468})
	if err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Fatalf("a world-writable state directory: err = %v", err)
	}
	// Through a symlink, what counts is the directory it names.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{StateDir: link, Host: "127.0.0.1", Port: 2468}); err == nil {
		t.Fatal("a symlink to a world-writable state directory was accepted")
	}
	if os.Geteuid() != 0 {
		return
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{StateDir: dir, Host: "127.0.0.1", Port: 2468}); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Fatalf("a state directory of another user: err = %v", err)
	}
}

// A record another user wrote (here: made so by chown, which needs root)
// is not trusted, even when it names a live process of ours by its true
// start time: stop signals nothing and says why. Before, stop killed the
// process it named.
func TestRecordOfAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	f := newFixture(t)
	d := f.daemon("serve", "1.0.0")
	victim := exec.Command("sleep", "300")
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { victim.Process.Kill(); victim.Wait() }()
	id, _, err := identify(victim.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.files.writeRecord(Record{PID: victim.Process.Pid, StartTicks: id.startTicks, BootID: id.bootID, Version: "1.0.0"}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d.files.Record, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if st, err := d.Status(context.Background()); err == nil || st.Running {
		t.Fatalf("status trusts another user's record: %+v %v", st, err)
	}
	_, err = d.Stop(context.Background())
	if err == nil || !strings.Contains(err.Error(), "uid 65534") {
		t.Errorf("stop: err = %v", err)
	}
	if !alive(victim.Process.Pid) {
		t.Fatal("stop signalled the process another user's record named")
	}
	if !exists(d.files.Record) {
		t.Error("stop removed another user's record")
	}
}

// A record naming pid 1 is never a daemon start started (its child), even
// with pid 1's true start time: trusting it, stop would send SIGTERM to
// init and then SIGKILL to process group -1, which kill(2) reads as every
// process the caller may signal. Checked on readRecord alone, so that no
// signal can be sent whatever the code under test does.
func TestRecordNamesPID1(t *testing.T) {
	files := FilesFor(t.TempDir(), "127.0.0.1", 2468)
	id, gone, err := identify(1)
	if err != nil || gone {
		t.Skipf("pid 1 cannot be read: %v", err)
	}
	if err := files.writeRecord(Record{PID: 1, StartTicks: id.startTicks, BootID: id.bootID, Version: "1.0.0"}); err != nil {
		t.Fatal(err)
	}
	if r, err := files.readRecord(); err == nil {
		t.Fatalf("a record of pid 1 is trusted: %+v", r)
	}
}

// A stop (or start) while another one holds the address's lock (a
// `daemon start` suspended with ^Z, or stuck) says what it waits for, and
// gives up after a bound instead of waiting silently for ever.
func TestLockWaitIsBoundedAndSaid(t *testing.T) {
	f := newFixture(t)
	d := f.daemon("serve", "1.0.0")
	holder, err := os.OpenFile(d.files.Lock, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if err := syscall.Flock(int(holder.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		var progress strings.Builder
		d.cfg.Progress = &progress
		// An hour of the bubble's clock: long past any bound, and the
		// end of the test if there is none.
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		_, err := d.Stop(ctx)
		if err == nil || !strings.Contains(err.Error(), "has held") {
			t.Errorf("stop while the lock is held: err = %v", err)
		}
		if !strings.Contains(progress.String(), "waiting for another daemon start or stop") {
			t.Errorf("nothing said while waiting: %q", progress.String())
		}
	})
}

// A stop interrupted (^C: its context canceled) while the daemon is still
// shutting down after SIGTERM leaves it to finish: no SIGKILL to its
// process group, which would take its agents down without their grace.
// Before, the interruption was taken for the end of --timeout.
func TestStopInterruptedSendsNoKill(t *testing.T) {
	f := newFixture(t)
	d := f.daemon("stubborn", "1.0.0")
	res, err := d.Start(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	pid := res.State.Record.PID
	grand := f.grandchildPID()
	// Canceled before it begins: the wait after SIGTERM ends at once, as
	// it does on a ^C half way through.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Stop(ctx); err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Errorf("interrupted stop: err = %v", err)
	}
	if !alive(pid) || !alive(grand) {
		t.Fatalf("an interrupted stop killed the daemon's group: daemon alive %v, grandchild alive %v", alive(pid), alive(grand))
	}
	if st, err := d.Status(context.Background()); err != nil || !st.Running {
		t.Errorf("status after an interrupted stop: %+v %v", st, err)
	}
	d.cfg.StopLimit = time.Millisecond
	if res, err := d.Stop(context.Background()); err != nil || !res.Killed {
		t.Fatalf("stop: %+v %v", res, err)
	}
}
