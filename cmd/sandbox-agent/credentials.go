package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sandbox-agent-go/sandbox-agent/adapters/fsys"
	"github.com/sandbox-agent-go/sandbox-agent/app/credentials"
	"github.com/sandbox-agent-go/sandbox-agent/domain"
)

func init() { extraCommands = append(extraCommands, newCredentialsCmd) }

// newCredentialsCmd is "sandbox-agent credentials": the reference's
// commands that print the LLM credentials found on this host.
func newCredentialsCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "credentials",
		Short: "Show the LLM provider credentials found on this host",
		Long: `Show the LLM provider credentials (Anthropic, OpenAI, and the other providers
of OpenCode's auth file) found on this host, as the daemon finds them for
credentialsAvailable in GET /v1/agents. The order: the environment
(ANTHROPIC_API_KEY, CLAUDE_API_KEY, CLAUDE_CODE_OAUTH_TOKEN,
ANTHROPIC_AUTH_TOKEN; OPENAI_API_KEY, CODEX_API_KEY), then ~/.amp/config.json,
~/.claude.json.api, ~/.claude.json, ~/.claude.json.nathan,
~/.claude/.credentials.json, ~/.claude-oauth-credentials.json,
~/.codex/auth.json and ~/.local/share/opencode/auth.json; the first found
wins for each provider. A missing or malformed file is skipped; one that
cannot be read is named on stderr (never its contents).`,
	}
	c.AddCommand(newCredentialsExtractCmd(), newCredentialsExtractEnvCmd())
	return c
}

// credentialFlags are the flags both commands take.
type credentialFlags struct {
	home    string
	noOAuth bool
}

func (f *credentialFlags) register(c *cobra.Command) {
	c.Flags().StringVarP(&f.home, "home-dir", "d", "", "look for the agents' files under `DIR` (default: $HOME)")
	c.Flags().BoolVar(&f.noOAuth, "no-oauth", false, "leave out OAuth tokens (variables, Claude Code's and Codex's tokens, OpenCode's oauth entries)")
}

// discover runs the discovery and names the files it could not read on
// stderr.
func (f *credentialFlags) discover(c *cobra.Command) domain.Credentials {
	home := f.home
	if !c.Flags().Changed("home-dir") {
		home = homeDir()
	}
	d := &credentials.Discovery{Fs: fsys.NewOS(), Home: home, LookupEnv: os.LookupEnv}
	res := d.Discover(credentials.Options{OAuth: !f.noOAuth})
	for _, p := range res.Problems {
		fmt.Fprintf(c.ErrOrStderr(), "sandbox-agent: skipped a credentials file that cannot be read: %v\n", p.Err)
	}
	return res.Credentials
}

// homeDir is $HOME, else the user database's home directory, else the
// working directory (as the reference falls back).
func homeDir() string {
	if h := os.Getenv("HOME"); h != "" {
		return h
	}
	if u, err := user.Current(); err == nil && u.HomeDir != "" {
		return u.HomeDir
	}
	return "."
}

func newCredentialsExtractCmd() *cobra.Command {
	var f credentialFlags
	var agent, provider string
	var reveal bool
	cmd := &cobra.Command{
		Use:   "extract",
		Short: "Print the credentials found, as JSON (keys redacted unless --reveal)",
		Long: `Print the credentials found as JSON: {"anthropic", "openai", "other"}, each
credential with its provider, source, auth_type, api_key and redacted. Keys
are redacted (first and last 4 characters, "****" up to 8) unless --reveal.

With --agent or --provider, print just that key, in full, on one line: the
agent's (claude and amp: Anthropic's; codex: OpenAI's; opencode: the
--provider named, else OpenAI's, else Anthropic's, else its only other
provider's) or the provider's. Nothing found is an error (exit status 1).`,
		Example: `  sandbox-agent credentials extract
  sandbox-agent credentials extract --agent claude
  sandbox-agent credentials extract --home-dir /mnt/home/me --no-oauth`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if c.Flags().Changed("agent") && !slices.Contains(domain.CredentialAgents, agent) {
				return usagef("invalid --agent %q (one of %s)", agent, strings.Join(domain.CredentialAgents, ", "))
			}
			creds := f.discover(c)
			out := c.OutOrStdout()
			pickOne := c.Flags().Changed("agent") || c.Flags().Changed("provider")
			if !pickOne {
				_, err := out.Write(domain.CredentialsJSON(creds, reveal))
				return err
			}
			if c.Flags().Changed("provider") && provider == "" {
				return fmt.Errorf("no credentials found for provider %s", provider)
			}
			cred, err := domain.SelectCredential(creds, agent, provider)
			if err != nil {
				return err
			}
			_, err = io.WriteString(out, cred.Key+"\n")
			return err
		},
	}
	cmd.Flags().StringVarP(&agent, "agent", "a", "", "print the key `AGENT` uses: "+strings.Join(domain.CredentialAgents, ", "))
	cmd.Flags().StringVarP(&provider, "provider", "p", "", "print the key of `PROVIDER` (anthropic, openai, or one of OpenCode's)")
	f.register(cmd)
	cmd.Flags().BoolVarP(&reveal, "reveal", "r", false, "print the keys in full in the JSON")
	return cmd
}

func newCredentialsExtractEnvCmd() *cobra.Command {
	var f credentialFlags
	var export bool
	cmd := &cobra.Command{
		Use:   "extract-env",
		Short: "Print the credentials found as NAME=VALUE lines for a shell",
		Long: `Print the credentials found as environment assignments: ANTHROPIC_API_KEY and
CLAUDE_API_KEY, OPENAI_API_KEY and CODEX_API_KEY, and <PROVIDER>_API_KEY for
each other provider of OpenCode's auth file (upper-cased, '-' as '_'; by
name). Nothing found prints nothing (exit status 0).

A value with anything but letters, digits and _ @ % + = : , . / - (or that
starts with = or holds :=, which zsh expands) is quoted for a POSIX shell, so eval "$(sandbox-agent credentials extract-env --export)"
sets exactly the value, whatever it holds (quotes, newlines, $(...),
backquotes). A value holding a NUL byte (possible only in a JSON file: no
environment variable can hold one), or a provider whose name a shell cannot
assign, is left out and named on stderr.`,
		Example: `  eval "$(sandbox-agent credentials extract-env --export)"`,
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			creds := f.discover(c)
			var b strings.Builder
			for _, v := range domain.CredentialEnv(creds) {
				line, ok := domain.EnvLine(v.Name, v.Value, export)
				switch {
				case ok:
					b.WriteString(line + "\n")
				case !domain.ValidEnvName(v.Name):
					fmt.Fprintf(c.ErrOrStderr(), "sandbox-agent: skipped provider %q: %q is not a variable name a shell can assign\n", v.Provider, v.Name)
				default:
					fmt.Fprintf(c.ErrOrStderr(), "sandbox-agent: skipped %s: its value holds a NUL byte, which no environment variable can\n", v.Name)
				}
			}
			_, err := io.WriteString(c.OutOrStdout(), b.String())
			return err
		},
	}
	cmd.Flags().BoolVarP(&export, "export", "e", false, "prefix each line with \"export \"")
	f.register(cmd)
	return cmd
}

// credentialDiscovery is the daemon's discovery for credentialsAvailable:
// its environment and $HOME, empty keys not counting (an
// ANTHROPIC_API_KEY="" is no credential). Files it cannot read are logged
// at debug level, by name only.
func credentialDiscovery(log *slog.Logger, home string) func() domain.Credentials {
	d := &credentials.Discovery{Fs: fsys.NewOS(), Home: home, LookupEnv: os.LookupEnv}
	return func() domain.Credentials {
		res := d.Discover(credentials.Options{OAuth: true, Usable: true})
		for _, p := range res.Problems {
			log.Debug("credentials file skipped", "path", p.Path, "err", p.Err)
		}
		return res.Credentials
	}
}
