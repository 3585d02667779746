// Command testagent is a tiny stdio JSON-RPC peer for the e2e tests: it
// answers with what it received, so tests can check the daemon's byte pipe
// in both directions and drive failure modes the mock agent does not have.
//
//	request "hash"           → {"bytes": <line length>, "sha256": <hex of the line>}
//	request "garbage"        → writes a non-JSON line, then answers {}
//	request "crlf"           → writes a notification "cr", a message with two
//	                           "method"s and an array, all with raw CRs as
//	                           whitespace, then answers {"ok":true} the same way
//	request "badutf8"        → writes a notification "bad" whose params.s holds
//	                           invalid UTF-8 ("a\xffb\xc3"), then answers {}
//	request "hang", "*/hang" → never answers
//	request "wedge"          → stops reading stdin forever, never answers
//	request anything else    → {"echoedMethod": ...} after params.delayMs
//	notification "echo"      → the same line, unchanged, back on stdout
//	notification "burst"     → params.n notifications {"method":"tick","params":{"i":k}}
//	notification "exit"      → exits with params.code
//	notification "spawn"     → starts a grandchild (sleep) that ignores SIGTERM, writes its pid
//	notification "spawn-setsid" → like "spawn", but the grandchild calls setsid
//	                           first (leaves the agent's group and session)
//	notification "spawn-doublefork" → like "spawn-setsid", but double-forked:
//	                           its parent exits at once (it is no child of the agent)
//	notification "bigline"   → one notification of params.n bytes of padding
//	                           ({"method":"big","params":{"pad":"xxx…"}}), params.count times (default 1)
//	notification "ignore-term" → ignores SIGTERM and stdin EOF from now on
//	notification "stderr-flood" → in the background: one 1 MiB line, then params.n
//	                           lines of 1 KiB on stderr, then the notification "flooded"
//
// Stdin lines are read without a length limit.
//
// With -acp [STATE_DIR] it is a scripted ACP agent instead (acp.go), for
// the OpenCode tests.
//
// With -http ADDR it is instead a bare HTTP echo server (it prints
// "listening <addr>" and answers every request with its body): the
// benchmarks' baseline for a loopback HTTP round trip to another process.
// With -proxy ADDR PROCS CMD [ARG...] it is a minimal HTTP-to-stdio proxy
// for the agent CMD, on PROCS Go Ps (see serveProxy).
package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

var out = bufio.NewWriterSize(os.Stdout, 64<<10)
var mu sync.Mutex

func write(line []byte) {
	mu.Lock()
	defer mu.Unlock()
	out.Write(line)
	out.WriteByte('\n')
	out.Flush()
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "-http" {
		serveEcho(os.Args[2])
		return
	}
	if len(os.Args) > 4 && os.Args[1] == "-proxy" {
		procs, err := strconv.Atoi(os.Args[3])
		if err != nil {
			fmt.Fprintln(os.Stderr, "testagent: -proxy ADDR PROCS CMD [ARG...]")
			os.Exit(2)
		}
		serveProxy(os.Args[2], procs, os.Args[4:])
		return
	}
	if len(os.Args) >= 2 && os.Args[1] == "-acp" {
		dir := ""
		if len(os.Args) >= 3 {
			dir = os.Args[2]
		}
		serveACP(dir)
		return
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 1 {
			handle(line[:len(line)-1])
		}
		if err != nil {
			if stubborn {
				blockForever() // only SIGKILL ends it now
			}
			return
		}
	}
}

// stubborn is set by "ignore-term": the agent then also outlives stdin EOF.
var stubborn bool

func handle(line []byte) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Code    int `json:"code"`
			N       int `json:"n"`
			Count   int `json:"count"`
			DelayMs int `json:"delayMs"`
		} `json:"params"`
	}
	if err := json.Unmarshal(line, &msg); err != nil {
		fmt.Fprintln(os.Stderr, "testagent: bad line:", err)
		return
	}
	reply := func(result string) {
		write([]byte(`{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"result":` + result + `}`))
	}
	if msg.ID == nil {
		switch msg.Method {
		case "echo":
			write(line)
		case "burst":
			for i := 1; i <= msg.Params.N; i++ {
				write([]byte(`{"jsonrpc":"2.0","method":"tick","params":{"i":` + strconv.Itoa(i) + `}}`))
			}
		case "exit":
			fmt.Fprintln(os.Stderr, "testagent: exiting with", msg.Params.Code)
			os.Exit(msg.Params.Code)
		case "spawn":
			cmd := exec.Command("sh", "-c", `trap "" TERM; while :; do sleep 1; done`)
			if err := cmd.Start(); err != nil {
				fmt.Fprintln(os.Stderr, "testagent: spawn:", err)
				return
			}
			write([]byte(`{"jsonrpc":"2.0","method":"spawned","params":{"pid":` + strconv.Itoa(cmd.Process.Pid) + `}}`))
		case "spawn-setsid":
			cmd := exec.Command("sh", "-c", `trap "" TERM; while :; do sleep 1; done`)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := cmd.Start(); err != nil {
				fmt.Fprintln(os.Stderr, "testagent: spawn-setsid:", err)
				return
			}
			write([]byte(`{"jsonrpc":"2.0","method":"spawned","params":{"pid":` + strconv.Itoa(cmd.Process.Pid) + `}}`))
		case "spawn-doublefork":
			out, err := exec.Command("sh", "-c", `(setsid sh -c 'trap "" TERM; while :; do sleep 1; done' >/dev/null 2>&1 & echo $!)`).Output()
			pid, perr := strconv.Atoi(strings.TrimSpace(string(out)))
			if err != nil || perr != nil {
				fmt.Fprintln(os.Stderr, "testagent: spawn-doublefork:", err, perr)
				return
			}
			write([]byte(`{"jsonrpc":"2.0","method":"spawned","params":{"pid":` + strconv.Itoa(pid) + `}}`))
		case "bigline":
			line := []byte(`{"jsonrpc":"2.0","method":"big","params":{"pad":"` + strings.Repeat("x", msg.Params.N) + `"}}`)
			for range max(1, msg.Params.Count) {
				write(line)
			}
		case "ignore-term":
			signalIgnoreTerm()
			stubborn = true
			write([]byte(`{"jsonrpc":"2.0","method":"ignoring-term"}`))
		case "stderr-flood":
			go floodStderr(msg.Params.N)
		}
		return
	}
	if strings.HasSuffix(msg.Method, "/hang") {
		return
	}
	switch msg.Method {
	case "hash":
		sum := sha256.Sum256(line)
		reply(`{"bytes":` + strconv.Itoa(len(line)) + `,"sha256":"` + hex.EncodeToString(sum[:]) + `"}`)
	case "garbage":
		write([]byte("this is not json"))
		reply(`{}`)
	case "badutf8":
		write([]byte("{\"jsonrpc\":\"2.0\",\"method\":\"bad\",\"params\":{\"s\":\"a\xffb\xc3\"}}"))
		reply(`{}`)
	case "crlf":
		write([]byte("{\"jsonrpc\":\"2.0\",\r\"method\":\"cr\",\"params\":{\"a\":\r\r1}}"))
		write([]byte("{\"method\":\"cr\",\r\"method\":\"x\"}")) // ambiguous
		write([]byte("[1,\r2]"))                                // not an object
		reply("\r{\"ok\":\rtrue}")
	case "hang":
	case "wedge":
		blockForever() // stop reading stdin; the daemon's writes must give up
	default:
		go func() {
			time.Sleep(time.Duration(msg.Params.DelayMs) * time.Millisecond)
			m, _ := json.Marshal(msg.Method)
			reply(`{"echoedMethod":` + string(m) + `}`)
		}()
	}
}

func signalIgnoreTerm() { signalIgnore(syscall.SIGTERM) }

// blockForever parks the calling goroutine. A bare select{} would not do:
// with every goroutine blocked the runtime exits with "deadlock".
func blockForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// floodStderr writes one oversized line and then n lines of 1 KiB to
// stderr as fast as the pipe takes them, then says so on stdout.
func floodStderr(n int) {
	w := bufio.NewWriterSize(os.Stderr, 64<<10)
	w.WriteString(strings.Repeat("L", 1<<20) + "\n")
	line := "flood " + strings.Repeat("x", 1017) + "\n"
	for range n {
		w.WriteString(line)
	}
	w.WriteString("flood done\n")
	w.Flush()
	write([]byte(`{"jsonrpc":"2.0","method":"flooded","params":{}}`))
}
