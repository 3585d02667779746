package main

import (
	"encoding/json"
	"io"

	"github.com/spf13/cobra"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/httpapi"
)

func newOpenAPICmd() *cobra.Command {
	var asYAML bool
	cmd := &cobra.Command{
		Use:   "openapi",
		Short: "Print the OpenAPI document of the HTTP API",
		Args:  noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return printOpenAPI(c.OutOrStdout(), asYAML)
		},
	}
	cmd.Flags().BoolVar(&asYAML, "yaml", false, "print YAML instead of JSON")
	return cmd
}

func printOpenAPI(stdout io.Writer, asYAML bool) error {
	doc := httpapi.OpenAPI(version)
	if asYAML {
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
