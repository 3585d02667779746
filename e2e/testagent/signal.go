package main

import (
	"os"
	"os/signal"
)

func signalIgnore(sig os.Signal) { signal.Ignore(sig) }
