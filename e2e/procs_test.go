package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"
)

// procStat is what e2e needs from /proc/<pid>/stat.
type procStat struct {
	pid, ppid, pgrp int
	state           byte // 'R', 'S', 'Z' (zombie), ...
}

// allProcs reads the stat line of every process on the machine.
func allProcs() []procStat {
	ents, _ := os.ReadDir("/proc")
	var out []procStat
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 {
			continue
		}
		ppid, _ := strconv.Atoi(string(f[1]))
		pgrp, _ := strconv.Atoi(string(f[2]))
		out = append(out, procStat{pid: pid, ppid: ppid, pgrp: pgrp, state: f[0][0]})
	}
	return out
}

func (p procStat) dead() bool { return p.state == 'Z' || p.state == 'X' }

// liveGroupMembers lists the non-zombie processes of process group pgid.
func liveGroupMembers(pgid int) []int {
	var pids []int
	for _, p := range allProcs() {
		if p.pgrp == pgid && !p.dead() {
			pids = append(pids, p.pid)
		}
	}
	return pids
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	f := bytes.Fields(b[i+1:])
	return len(f) > 0 && f[0][0] != 'Z' && f[0][0] != 'X'
}

// waitGone polls until none of pids is alive, failing after limit.
func waitGone(t *testing.T, limit time.Duration, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var alive []int
		for _, p := range pids {
			if processAlive(p) {
				alive = append(alive, p)
			}
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes still alive after %v: %v", limit, alive)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type serverInfo struct {
	ServerID        string `json:"serverId"`
	Agent           string `json:"agent"`
	PID             int    `json:"pid"`
	State           string `json:"state"`
	ExitCode        *int   `json:"exitCode"`
	PendingRequests int    `json:"pendingRequests"`
	Subscribers     int    `json:"subscribers"`
	LastEventID     uint64 `json:"lastEventId"`
	BufferedEvents  int    `json:"bufferedEvents"`
	CreatedAtMs     int64  `json:"createdAtMs"`
}

func (d *daemon) servers() []serverInfo {
	d.t.Helper()
	st, _, b := d.do("GET", "/v1/acp", nil)
	if st != 200 {
		d.t.Fatalf("GET /v1/acp: %d %s", st, b)
	}
	var doc struct{ Servers []serverInfo }
	if err := json.Unmarshal(b, &doc); err != nil {
		d.t.Fatal(err)
	}
	return doc.Servers
}

func (d *daemon) server(id string) serverInfo {
	d.t.Helper()
	for _, s := range d.servers() {
		if s.ServerID == id {
			return s
		}
	}
	d.t.Fatalf("server %q not listed", id)
	return serverInfo{}
}

func osWriteFile(path string, b []byte) error { return os.WriteFile(path, b, 0o755) }
