package main

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// onSIGHUP runs reload on every SIGHUP, one at a time on one goroutine, until
// the returned stop is called; stop returns once that goroutine is gone, so
// no reload runs after it. The token file and the auth policies both reload
// this way.
func onSIGHUP(reload func()) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-hup:
				reload()
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
		wg.Wait()
	}
}
