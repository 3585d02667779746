package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
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
