package main

import (
	"context"
	"os"
	"syscall"
	"testing"
)

// TestOnSIGHUPStops: a reload in progress gets its context ended by stop
// (or by the daemon's context, at SIGTERM), so stop never waits on it.
func TestOnSIGHUPStops(t *testing.T) {
	for _, how := range []string{"stop", "daemon context"} {
		t.Run(how, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			started := make(chan struct{})
			ended := make(chan error, 1)
			stop := onSIGHUP(ctx, func(rctx context.Context) {
				close(started)
				<-rctx.Done() // a reload stuck until told to give up
				ended <- rctx.Err()
			})
			if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			<-started
			if how == "daemon context" {
				cancel()
				if err := <-ended; err == nil {
					t.Error("reload context not ended")
				}
			}
			stop()
			if how == "stop" {
				if err := <-ended; err == nil {
					t.Error("reload context not ended")
				}
			}
		})
	}
}
