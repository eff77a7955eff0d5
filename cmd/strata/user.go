package main

// strata user: create, delete and list the SCRAM credentials Kafka
// clients log in with (SASL/SCRAM on the Kafka listener).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/security"
)

func init() { clientCommands = append(clientCommands, newUserCommand) }

var scramMechanisms = []string{cluster.SCRAMSHA256, cluster.SCRAMSHA512}

func newUserCommand() *cobra.Command {
	var f clientFlags
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Create, delete and list SCRAM users for Kafka clients",
		Long: `Manage the SCRAM credentials Kafka clients log in with (SASL/SCRAM-SHA-256
and SCRAM-SHA-512 on the Kafka listener, when kafka.sasl_mechanisms offers
them). A user NAME logs in as the principal User:NAME, which ACLs then
allow what they allow (strata acl).

The password is read from a file or standard input and salted here; the
cluster stores only the salt, the iteration count and the keys derived
from the salted password, never the password. Credentials live in the
cluster metadata (Raft), so every broker knows them and they survive
restarts. Managing them needs admin on the cluster.`,
		Example: `  printf '%s\n' "$PASSWORD" | strata user create alice --password-file -
  strata user create alice --password-file alice.pw --mechanism SCRAM-SHA-512
  strata user list
  strata user delete alice`,
	}
	cmd.RunE = groupRun
	f.register(cmd)
	cmd.AddCommand(newUserCreateCommand(&f), newUserDeleteCommand(&f), newUserListCommand(&f))
	return cmd
}

// checkMechanisms refuses a mechanism that is not SCRAM-SHA-256 or
// SCRAM-SHA-512.
func checkMechanisms(mechs []string) error {
	for _, m := range mechs {
		if !slices.Contains(scramMechanisms, m) {
			return usageErrorf("--mechanism %q: want %s", m, strings.Join(scramMechanisms, " or "))
		}
	}
	return nil
}

// readPassword reads the first line of path ("-": standard input).
func readPassword(path string, stdin io.Reader) (string, error) {
	if path == "" {
		return "", usageErrorf("--password-file is required (\"-\" reads standard input): a password on the command line would show in the process list")
	}
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return "", err
		}
		defer f.Close()
		r = f
	}
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", err
	}
	pw := strings.TrimRight(line, "\r\n")
	if pw == "" {
		return "", usageErrorf("the password is empty")
	}
	return pw, nil
}

func newUserCreateCommand(f *clientFlags) *cobra.Command {
	var passwordFile string
	var mechs []string
	var iterations int
	cmd := &cobra.Command{
		Use:   "create NAME --password-file FILE [--mechanism M]... [--iterations N]",
		Short: "Create a user, or set a user's password",
		Long: `Store NAME's SCRAM credential for each mechanism (both by default),
salted here with a new random salt. An existing credential of the user for
that mechanism is replaced: this is also how a password is changed.`,
		Example: `  printf '%s\n' "$PASSWORD" | strata user create alice --password-file -`,
		Args:    exactArgs("name"),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := cluster.ValidateSCRAMUser(name); err != nil {
				return usageErrorf("%s", strings.TrimPrefix(err.Error(), "cluster: "))
			}
			if err := checkMechanisms(mechs); err != nil {
				return err
			}
			if iterations < cluster.MinSCRAMIterations || iterations > cluster.MaxSCRAMIterations {
				return usageErrorf("--iterations %d: want %d to %d", iterations, cluster.MinSCRAMIterations, cluster.MaxSCRAMIterations)
			}
			pw, err := readPassword(passwordFile, cmd.InOrStdin())
			if err != nil {
				return err
			}
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				for _, m := range mechs {
					salt := security.NewSCRAMSalt()
					salted, err := security.SCRAMSaltedPassword(m, pw, salt, iterations)
					if err != nil {
						return err
					}
					if err := c.SetSCRAMCredential(ctx, name, m, salt, iterations, salted); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "set the %s credential of %s (principal User:%s)\n", m, name, name)
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringVar(&passwordFile, "password-file", "", `file whose first line is the password; "-" reads standard input`)
	cmd.Flags().StringSliceVar(&mechs, "mechanism", scramMechanisms, "SCRAM mechanisms to set: SCRAM-SHA-256, SCRAM-SHA-512")
	cmd.Flags().IntVar(&iterations, "iterations", 8192, "PBKDF2 iterations (4096 to 16384)")
	return cmd
}

func newUserDeleteCommand(f *clientFlags) *cobra.Command {
	var mechs []string
	cmd := &cobra.Command{
		Use:   "delete NAME [--mechanism M]...",
		Short: "Delete a user's credentials",
		Long: `Remove NAME's SCRAM credentials: those of the mechanisms given, or all of
them. Kafka clients of that user can no longer log in; connections already
logged in stay until they close.`,
		Example: `  strata user delete alice
  strata user delete alice --mechanism SCRAM-SHA-256`,
		Args: exactArgs("name"),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := checkMechanisms(mechs); err != nil {
				return err
			}
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				if len(mechs) == 0 {
					users, err := c.ListSCRAMUsers(ctx)
					if err != nil {
						return err
					}
					for _, u := range users {
						if u.GetUser() == name {
							mechs = u.GetMechanisms()
						}
					}
					if len(mechs) == 0 {
						return usageErrorf("user %s has no SCRAM credentials", name)
					}
				}
				for _, m := range mechs {
					if err := c.DeleteSCRAMCredential(ctx, name, m); err != nil {
						return err
					}
					fmt.Fprintf(cmd.OutOrStdout(), "deleted the %s credential of %s\n", m, name)
				}
				return nil
			})
		}),
	}
	cmd.Flags().StringSliceVar(&mechs, "mechanism", nil, "SCRAM mechanisms to delete; none means all the user has")
	return cmd
}

func newUserListCommand(f *clientFlags) *cobra.Command {
	var format outputFlag
	cmd := &cobra.Command{
		Use:     "list",
		Short:   "List the users and their SCRAM mechanisms",
		Long:    "List the users that have SCRAM credentials, their principal and mechanisms.\n--format json writes one JSON array instead (docs/CLI.md).",
		Example: "  strata user list\n  strata user list --format json",
		Args:    exactArgs(),
		RunE: run(func(ctx context.Context, cmd *cobra.Command, _ []string) error {
			if err := format.check(); err != nil {
				return err
			}
			return f.admin(ctx, func(ctx context.Context, c *client.Client) error {
				users, err := c.ListSCRAMUsers(ctx)
				if err != nil {
					return err
				}
				if format == outputJSON {
					out := []userDoc{}
					for _, u := range users {
						out = append(out, userDoc{User: u.GetUser(), Principal: "User:" + u.GetUser(), Mechanisms: orEmpty(u.GetMechanisms())})
					}
					return writeJSON(cmd.OutOrStdout(), out)
				}
				tw := newTable(cmd.OutOrStdout())
				fmt.Fprintln(tw, "USER\tPRINCIPAL\tMECHANISMS")
				for _, u := range users {
					fmt.Fprintf(tw, "%s\tUser:%s\t%s\n", u.GetUser(), u.GetUser(), strings.Join(u.GetMechanisms(), ","))
				}
				return tw.Flush()
			})
		}),
	}
	addOutputFlag(cmd, &format)
	return cmd
}

// userDoc is one user in user list --format json.
type userDoc struct {
	User       string   `json:"user"`
	Principal  string   `json:"principal"`
	Mechanisms []string `json:"mechanisms"`
}
