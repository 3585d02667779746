package main

import (
	"context"
	"io"
)

func runAPI(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return usagef("api: not implemented yet")
}
