package main

import (
	"encoding/json"
	"flag"
	"io"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi"
)

func runOpenAPI(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("openapi", flag.ContinueOnError)
	asYAML := fs.Bool("yaml", false, "print YAML instead of JSON")
	if err := fs.Parse(args); err != nil {
		return usagef("%v", err)
	}
	doc := httpapi.OpenAPI(version)
	if *asYAML {
		b, err := doc.YAML()
		if err != nil {
			return err
		}
		_, err = stdout.Write(b)
		return err
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	_, err = stdout.Write(append(b, '\n'))
	return err
}
