package main

// strata dev: development helpers that need no broker. `dev certs` makes
// a CA with broker and client certificates and a gossip key, enough to run
// a cluster with TLS on one machine; `dev token` makes a client token.

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/strata-log/strata/security"
)

func newDevCommand() *cobra.Command {
	dev := &cobra.Command{
		Use:   "dev",
		Short: "Development helpers: certificates and tokens for a local cluster",
		Args:  cobra.NoArgs,
	}
	dev.AddCommand(newDevCertsCommand(), newDevTokenCommand())
	return dev
}

func newDevCertsCommand() *cobra.Command {
	var (
		dir     string
		brokers int
		clients []string
		hosts   []string
		cluster string
	)
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Make a development CA, broker and client certificates, and a gossip key",
		Long: `Make a development CA and certificates in --dir:

  ca.pem, ca-key.pem                the CA (reused when it exists, so brokers
                                    added later trust the same root)
  broker-N.pem, broker-N-key.pem    broker N: DNS name broker-N.<cluster>, which
                                    proves its id, plus localhost, 127.0.0.1
                                    and every --host
  client-NAME.pem, client-NAME-key.pem
                                    a client whose principal is User:NAME
  gossip.key                        a gossip encryption key (kept if it exists)

For development and tests only: the CA key sits beside the certificates.`,
		Example: `  strata dev certs --dir ./certs --brokers 3 --client admin --client app
  strata serve --security-tls-ca-file certs/ca.pem --security-tls-cert-file certs/broker-1.pem \
    --security-tls-key-file certs/broker-1-key.pem --gossip-secret-key "$(cat certs/gossip.key)" \
    --security-superusers User:admin
  strata topic list --tls-ca certs/ca.pem --tls-cert certs/client-admin.pem --tls-key certs/client-admin-key.pem`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if brokers < 0 || brokers > 1000 {
				return fmt.Errorf("--brokers %d: want 0 to 1000", brokers)
			}
			if err := security.WriteDevCerts(dir, security.DevCerts{Cluster: cluster, Brokers: brokers, Clients: clients, Hosts: hosts}); err != nil {
				return err
			}
			keyFile := filepath.Join(dir, "gossip.key")
			if _, err := os.Stat(keyFile); errors.Is(err, os.ErrNotExist) {
				key := make([]byte, 32)
				if _, err := rand.Read(key); err != nil {
					return err
				}
				if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote a CA, %d broker and %d client certificates and a gossip key to %s\n", brokers, len(clients), dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "./certs", "directory to write to")
	cmd.Flags().IntVar(&brokers, "brokers", 3, "brokers 1..N get a certificate")
	cmd.Flags().StringArrayVar(&clients, "client", []string{"admin"}, "a client certificate for this name (repeatable)")
	cmd.Flags().StringArrayVar(&hosts, "host", nil, "another host name or address on every broker certificate (repeatable); none by default")
	cmd.Flags().StringVar(&cluster, "cluster-name", security.DefaultCluster, "cluster name in the brokers' identities (security.cluster_name)")
	return cmd
}

func newDevTokenCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "token User:NAME",
		Short: "Make a client token and the tokens file line that admits it",
		Long: `Make a random bearer token for a principal. The token goes to stdout's first
line, for the client (STRATA_TOKEN); the second line goes into the brokers'
tokens file (security.tokens_file), which keeps only its hash and is re-read
when it changes.`,
		Example: `  strata dev token User:app | { read -r token; read -r line; echo "$line" >> tokens; echo "$token" > app.token; }`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			token, line, err := security.NewToken(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), token)
			fmt.Fprintln(cmd.OutOrStdout(), line)
			return nil
		},
	}
}
