package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

type stdio struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

func startStdio(bin string) (*stdio, error) {
	cmd := exec.Command(bin, "mock-agent-process")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &stdio{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<20)}, nil
}

func (s *stdio) close() {
	s.in.Close()
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// call writes msg and reads lines until the response carrying idField;
// it calls each earlier line with on.
func (s *stdio) call(msg, idField string, on func([]byte)) ([]byte, error) {
	if _, err := io.WriteString(s.in, msg+"\n"); err != nil {
		return nil, err
	}
	for {
		line, err := s.out.ReadSlice('\n')
		if err != nil {
			return nil, err
		}
		if bytes.Contains(line, []byte(idField)) && !bytes.Contains(line, []byte(`"method"`)) {
			return append([]byte(nil), line...), nil
		}
		if on != nil {
			on(line)
		}
	}
}

// startDirect starts the mock over its pipes, initialised, with a
// session for the streaming runs.
func startDirect(bin string) (*stdio, string, error) {
	s, err := startStdio(bin)
	if err != nil {
		return nil, "", err
	}
	if _, err := s.call(initMsg, `"id":1`, nil); err != nil {
		s.close()
		return nil, "", err
	}
	b, err := s.call(newSessionMsg("s"), `"id":"s"`, nil)
	if err != nil {
		s.close()
		return nil, "", err
	}
	sid, err := sessionID(b)
	if err != nil {
		s.close()
		return nil, "", err
	}
	return s, sid, nil
}

// directRoundTrip makes one request over the pipes.
func directRoundTrip(s *stdio, seq *int) error {
	*seq++
	id := strconv.Itoa(*seq)
	_, err := s.call(`{"jsonrpc":"2.0","id":`+id+`,"method":"bench/ping","params":{}}`, `"id":`+id+`,`, nil)
	return err
}

// directStream asks for n updates over the pipes and counts them into f.
func directStream(s *stdio, sid string, n int, seq *int, f *streamFigures) error {
	*seq++
	id := "prompt-" + strconv.Itoa(*seq)
	got := 0
	var last time.Time
	start := time.Now()
	if _, err := s.call(promptMsg(id, sid, n), `"id":"`+id+`"`, func(line []byte) {
		if bytes.Contains(line, []byte("mock: chunk ")) {
			got++
			last = time.Now()
		}
	}); err != nil {
		return err
	}
	f.add(got, n, start, last)
	return nil
}

// directFirsts times k fresh agents' first answer, process start included.
func directFirsts(ctx context.Context, bin string, k int) (latency, error) {
	var durs []time.Duration
	for range k {
		if ctx.Err() != nil {
			return latency{}, ctx.Err()
		}
		start := time.Now()
		p, err := startStdio(bin)
		if err != nil {
			return latency{}, err
		}
		_, err = p.call(initMsg, `"id":1`, nil)
		durs = append(durs, time.Since(start))
		p.close()
		if err != nil {
			return latency{}, err
		}
	}
	return latencyOf(durs), nil
}
