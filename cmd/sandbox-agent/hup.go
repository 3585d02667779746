package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// hupStopWait bounds how long stop waits for a reload in progress. Every
// read a reload does gives up when its context ends (fsys.ReadRegular),
// so this is a backstop: shutdown never hangs on a reload.
const hupStopWait = 2 * time.Second

// onSIGHUP runs reload on every SIGHUP, one at a time on one goroutine,
// until ctx ends or the returned stop is called; the reload's context ends
// with them. stop returns once that goroutine is gone, or after
// hupStopWait if a reload is still stuck (it then returns on its own and
// starts no other). The token file and the auth policies both reload this
// way.
func onSIGHUP(ctx context.Context, reload func(ctx context.Context)) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if ctx.Err() == nil {
					reload(ctx)
				}
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		select {
		case <-done:
		case <-time.After(hupStopWait):
		}
	}
}
