package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// serveEcho answers every HTTP request with its own body, until killed.
func serveEcho(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testagent:", err)
		os.Exit(1)
	}
	fmt.Println("listening", ln.Addr())
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
}

// serveProxy is the least an HTTP-to-stdio proxy process can do: it runs
// the agent command, writes each request body plus a newline to its stdin
// and answers with the next line of its stdout. It handles one request at a
// time and knows nothing of ids; the benchmarks' floor for the daemon.
// TESTAGENT_AGENT_GODEBUG ("=" and a value, or empty for none) is the
// agent's GODEBUG when set.
func serveProxy(addr string, procs int, command []string) {
	runtime.GOMAXPROCS(procs)
	cmd := exec.Command(command[0], command[1:]...)
	if was, ok := os.LookupEnv("TESTAGENT_AGENT_GODEBUG"); ok {
		// The agent gets GODEBUG as it was before the caller set it for
		// this proxy, as the daemon's agents do (its sysmon setting).
		cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
			return strings.HasPrefix(kv, "GODEBUG=") || strings.HasPrefix(kv, "TESTAGENT_AGENT_GODEBUG=")
		})
		if v, set := strings.CutPrefix(was, "="); set {
			cmd.Env = append(cmd.Env, "GODEBUG="+v)
		}
	}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testagent:", err)
		os.Exit(1)
	}
	answers := make(chan []byte)
	go func() {
		r := bufio.NewReaderSize(stdout, 64<<10)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				os.Exit(1)
			}
			answers <- line
		}
	}()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testagent:", err)
		os.Exit(1)
	}
	fmt.Println("listening", ln.Addr())
	var one sync.Mutex
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		one.Lock()
		defer one.Unlock()
		_, _ = stdin.Write(append(body, '\n'))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(<-answers)
	}))
}
