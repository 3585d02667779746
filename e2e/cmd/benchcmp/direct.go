package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os/exec"
	"slices"
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

func benchDirect(ctx context.Context, c config, bin string) (*figures, error) {
	f := &figures{}
	logf("direct stdio: round trips, bursts, first requests")
	s, err := startStdio(bin)
	if err != nil {
		return nil, err
	}
	defer s.close()
	if _, err := s.call(initMsg, `"id":1`, nil); err != nil {
		return nil, err
	}
	var durs []time.Duration
	for i := range c.roundTrips {
		id := strconv.Itoa(100 + i)
		start := time.Now()
		if _, err := s.call(`{"jsonrpc":"2.0","id":`+id+`,"method":"bench/ping","params":{}}`, `"id":`+id+`,`, nil); err != nil {
			return nil, err
		}
		durs = append(durs, time.Since(start))
	}
	f.rttP50, f.rttP99 = percentile(durs, 0.5), percentile(durs, 0.99)

	b, err := s.call(newSessionMsg("s"), `"id":"s"`, nil)
	if err != nil {
		return nil, err
	}
	sid, err := sessionID(b)
	if err != nil {
		return nil, err
	}
	var rates []float64
	for range c.burstRuns {
		got := 0
		start := time.Now()
		if _, err := s.call(promptMsg("prompt", sid, c.burst), `"id":"prompt"`, func(line []byte) {
			if bytes.Contains(line, []byte("mock: chunk ")) {
				got++
			}
		}); err != nil {
			return nil, err
		}
		rates = append(rates, float64(got)/time.Since(start).Seconds())
		f.burstLost = max(f.burstLost, c.burst-got)
	}
	slices.Sort(rates)
	f.burstRate = rates[len(rates)/2]

	durs = durs[:0]
	for range c.firsts {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		start := time.Now()
		p, err := startStdio(bin)
		if err != nil {
			return nil, err
		}
		_, err = p.call(initMsg, `"id":1`, nil)
		durs = append(durs, time.Since(start))
		p.close()
		if err != nil {
			return nil, err
		}
	}
	f.firstP50, f.firstP99 = percentile(durs, 0.5), percentile(durs, 0.99)
	return f, nil
}
