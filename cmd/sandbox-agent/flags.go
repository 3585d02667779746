package main

import (
	"flag"
	"strings"
)

// stringList is a repeatable flag; comma-separated values are split too.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*s = append(*s, part)
		}
	}
	return nil
}

// aliases registers short names for flags already defined on fs, so both
// -p and --port work, as the reference CLI accepts.
func aliases(fs *flag.FlagSet, pairs ...string) {
	for i := 0; i+1 < len(pairs); i += 2 {
		long := fs.Lookup(pairs[i+1])
		fs.Var(long.Value, pairs[i], "alias of --"+pairs[i+1])
	}
}
