package main

// What every client command shares: the --broker and --timeout flags, the
// connection to the cluster, Ctrl-C handling and the translation of errors
// into one line a person can act on.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-log/strata/client"
)

// brokerEnv names the environment variable that replaces defaultBroker.
const brokerEnv = "STRATA_BROKER"

// defaultTimeout bounds each request to the cluster unless --timeout says
// otherwise.
const defaultTimeout = 30 * time.Second

// clientFlags are the persistent flags of a client command tree (topic,
// produce, consume, bench): where the cluster is and how long to wait for it.
type clientFlags struct {
	brokers string
	timeout time.Duration
	// TLS and credentials; each flag has an environment variable.
	tlsCA, tlsCert, tlsKey string
	token                  string
}

// Environment variables of the TLS and credential flags. The token is best
// given this way: a flag's value shows in the process list.
// clientEnv lists the client commands' variables, which strata serve
// does not take for unknown broker settings.
var clientEnv = []string{brokerEnv, tlsCAEnv, tlsCertEnv, tlsKeyEnv, tokenEnv}

const (
	tlsCAEnv   = "STRATA_TLS_CA"
	tlsCertEnv = "STRATA_TLS_CERT"
	tlsKeyEnv  = "STRATA_TLS_KEY"
	tokenEnv   = "STRATA_TOKEN"
)

// register adds --broker and --timeout to cmd and all its subcommands.
func (f *clientFlags) register(cmd *cobra.Command) {
	def := defaultBroker
	if v := strings.TrimSpace(os.Getenv(brokerEnv)); v != "" {
		def = v
	}
	cmd.PersistentFlags().StringVar(&f.brokers, "broker", def,
		"broker host:port (a host alone means port "+defaultBrokerPort+"), or a comma-separated list of them to bootstrap from (env "+brokerEnv+")")
	cmd.PersistentFlags().DurationVar(&f.timeout, "timeout", defaultTimeout,
		"how long to wait for the cluster: connecting, each admin call, each produced record's acknowledgement")
	pf := cmd.PersistentFlags()
	pf.StringVar(&f.tlsCA, "tls-ca", os.Getenv(tlsCAEnv), "PEM file of the CA that signed the brokers' certificates; set, the client speaks TLS (env "+tlsCAEnv+"); empty means plaintext")
	pf.StringVar(&f.tlsCert, "tls-cert", os.Getenv(tlsCertEnv), "PEM file of this client's certificate, which names its principal User:<common name> (env "+tlsCertEnv+"); empty means none")
	pf.StringVar(&f.tlsKey, "tls-key", os.Getenv(tlsKeyEnv), "PEM file of the client certificate's key (env "+tlsKeyEnv+"); empty means none")
	pf.StringVar(&f.token, "token", "", "bearer token instead of a client certificate; better given as env "+tokenEnv+", which it defaults to")
}

// describeTimeout replaces the help of --timeout for a command where it
// bounds something narrower than every request.
func describeTimeout(cmd *cobra.Command, usage string) {
	cmd.PersistentFlags().Lookup("timeout").Usage = usage
}

// options are the client options the TLS and credential flags ask for.
func (f *clientFlags) options() ([]client.Option, error) {
	token := f.token
	if token == "" {
		token = strings.TrimSpace(os.Getenv(tokenEnv))
	}
	if f.tlsCA == "" {
		if f.tlsCert != "" || token != "" {
			return nil, errors.New("--tls-cert and --token need --tls-ca (the CA that signed the brokers' certificates): credentials are never sent in plaintext")
		}
		return nil, nil
	}
	cfg, err := client.TLSConfig(f.tlsCA, f.tlsCert, f.tlsKey)
	if err != nil {
		return nil, err
	}
	opts := []client.Option{client.WithTLS(cfg)}
	if token != "" {
		opts = append(opts, client.WithToken(token))
	}
	return opts, nil
}

// bootstrap splits --broker into addresses, each as brokerAddr reads it.
func (f *clientFlags) bootstrap() ([]string, error) {
	return parseBrokers(f.brokers)
}

// parseBrokers reads a comma-separated list of broker addresses, each as
// brokerAddr reads it. It is the one place every client command reads
// --broker (and STRATA_BROKER).
func parseBrokers(list string) ([]string, error) {
	var addrs []string
	for _, a := range strings.Split(list, ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		addr, err := brokerAddr(a)
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, addr)
	}
	if len(addrs) == 0 {
		return nil, usageErrorf("--broker is empty: want host:port, or a comma-separated list of them")
	}
	return addrs, nil
}

// defaultBrokerPort is the port of a --broker given without one: the port
// strata serve listens on by default, as Kafka tools assume 9092.
const defaultBrokerPort = "7400"

// brokerAddr reads one broker address: host:port, or a host alone (a name,
// an IPv4 address, an IPv6 address bare or in brackets), which gets the
// default port.
func brokerAddr(a string) (string, error) {
	bad := func(why string) (string, error) {
		return "", usageErrorf("--broker %q: %s; want host:port, or a host alone for port %s", a, why, defaultBrokerPort)
	}
	if host, port, err := net.SplitHostPort(a); err == nil {
		if host == "" {
			return bad("no host")
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return bad("the port is not a number from 1 to 65535")
		}
		return a, nil
	}
	host := a
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1]
	}
	switch {
	case strings.Contains(host, ":") && net.ParseIP(host) == nil,
		host == "", strings.ContainsAny(host, "[]/ "):
		return bad("not a host or host:port")
	}
	return net.JoinHostPort(host, defaultBrokerPort), nil
}

// connect makes a Client and loads the cluster metadata, within --timeout.
// Each RPC the client makes later is bounded by --timeout too.
func (f *clientFlags) connect(ctx context.Context) (*client.Client, error) {
	if f.timeout <= 0 {
		return nil, fmt.Errorf("--timeout %s: want a positive duration such as 30s", f.timeout)
	}
	addrs, err := f.bootstrap()
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	opts, err := f.options()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cctx, addrs, append(opts, client.WithRequestTimeout(f.timeout))...)
	if err != nil {
		return nil, f.connectError(ctx, err)
	}
	return c, nil
}

// connectError explains why no broker answered.
func (f *clientFlags) connectError(ctx context.Context, err error) error {
	addrs, _ := f.bootstrap() // connect checked them
	where := strings.Join(addrs, ", ")
	switch {
	case ctx.Err() != nil:
		return errInterrupted
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("no answer from a broker at %s within %s (--timeout)", where, f.timeout)
	}
	if e, ok := client.AsError(err); ok && e.Reason == "" {
		return fmt.Errorf("cannot reach a broker at %s: %s (%s)", where, transportCause(e.Message), f.transportHint(e.Message))
	}
	return explain(err)
}

// transportHint guesses what to do about a transport failure: most often
// a broker that is not running, or a TLS mismatch between it and the flags.
func (f *clientFlags) transportHint(msg string) string {
	switch {
	case strings.Contains(msg, "does not look like a TLS handshake"):
		return "the broker speaks plaintext: drop --tls-ca"
	case strings.Contains(msg, "certificate signed by unknown authority"):
		return "is --tls-ca the CA that signed the brokers' certificates?"
	case strings.Contains(msg, "x509:") || strings.Contains(msg, "tls:"):
		return "the TLS handshake failed: check --tls-ca, --tls-cert and --tls-key"
	case f.tlsCA == "" && (strings.Contains(msg, "connection reset") || strings.Contains(msg, "EOF") ||
		strings.Contains(msg, "server preface") || strings.Contains(msg, "closed network connection")):
		return "if the broker runs with TLS, pass --tls-ca (env " + tlsCAEnv + ")"
	}
	return "is `strata serve` running there? see --broker"
}

// transportCause shortens a gRPC transport message such as
// `connection error: desc = "transport: Error while dialing: dial tcp
// 127.0.0.1:7400: connect: connection refused"` to its last cause.
func transportCause(msg string) string {
	msg = strings.TrimRight(strings.TrimSpace(msg), `"`)
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		return msg[i+2:]
	}
	return msg
}

// errInterrupted is returned by a command that Ctrl-C stopped before it
// had anything to show.
var errInterrupted = errors.New("interrupted")

// signalContext is ctx ended by Ctrl-C (SIGINT) or SIGTERM. Once it has
// ended, the handler is removed, so a second Ctrl-C kills the process at
// once should the clean stop hang.
func signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	sctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sctx.Done()
		stop()
	}()
	return sctx, stop
}

// withTimeout bounds one request by --timeout.
func (f *clientFlags) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, f.timeout)
}

// admin connects, makes one admin call bounded by --timeout, and closes the
// client.
func (f *clientFlags) admin(ctx context.Context, call func(ctx context.Context, c *client.Client) error) error {
	c, err := f.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	cctx, cancel := f.withTimeout(ctx)
	defer cancel()
	return call(cctx, c)
}

// run wraps a client command's body: it gets a context that Ctrl-C ends
// and its error is explained for people (explain).
func run(body func(ctx context.Context, cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		ctx, stop := signalContext(cmd.Context())
		defer stop()
		err := body(ctx, cmd, args)
		if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return errInterrupted
		}
		return explain(err)
	}
}

// userError is an error already worded for the person at the terminal;
// explain passes it through.
type userError struct{ msg string }

func (e *userError) Error() string { return e.msg }

// usageErrorf words a mistake in the command line.
func usageErrorf(format string, args ...any) error {
	return &userError{msg: fmt.Sprintf(format, args...)}
}

// explain turns an error of the client library into one line for people:
// the broker's message and, in parentheses, its machine-readable reason,
// as in `topic "x" not found (TOPIC_NOT_FOUND)`. main adds "strata: ".
func explain(err error) error {
	if err == nil {
		return nil
	}
	var ue *userError
	if errors.As(err, &ue) || errors.Is(err, errInterrupted) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		msg := "timed out (raise --timeout to wait longer)"
		if e, ok := client.AsError(err); ok && e.Reason != "" {
			msg += "; last error: " + reasonText(e)
		}
		return &userError{msg: msg}
	}
	if e, ok := client.AsError(err); ok {
		if e.Reason != "" {
			msg := reasonText(e)
			if errors.Is(err, client.ErrDeliveryTimeout) {
				msg = "not delivered in time (raise --timeout to wait longer); last error: " + msg
			}
			return &userError{msg: msg}
		}
		return &userError{msg: fmt.Sprintf("broker unavailable: %s (%s)", transportCause(e.Message), e.Code)}
	}
	return &userError{msg: stripPrefixes(err.Error())}
}

// topicError words a missing topic the same way whichever call found it
// missing: `topic "x" not found (TOPIC_NOT_FOUND)`.
func topicError(topic string, err error) error {
	if errors.Is(err, client.ErrTopicNotFound) {
		return usageErrorf("topic %q not found (TOPIC_NOT_FOUND)", topic)
	}
	return err
}

// reasonText is a broker error as `message (REASON)`.
func reasonText(e *client.Error) string {
	msg := stripPrefixes(e.Message)
	if msg == "" {
		msg = strings.ToLower(strings.ReplaceAll(e.Reason, "_", " "))
	}
	return msg + " (" + e.Reason + ")"
}

// stripPrefixes drops the package prefixes ("strata: ", "broker: ",
// "config: ", ...) that errors collect on their way through the layers:
// the user reads "strata: " once, from main.
func stripPrefixes(msg string) string {
	for {
		trimmed := msg
		for _, p := range []string{"strata: ", "broker: ", "config: ", "cluster: ", "record: ", "hotlog: ", "rpc: "} {
			trimmed = strings.TrimPrefix(trimmed, p)
		}
		if trimmed == msg {
			return msg
		}
		msg = trimmed
	}
}

// groupRun is the RunE of a command that only groups others (topic,
// bench): alone it shows its help, and a mistyped subcommand is an error
// rather than the help with success.
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %q?", s[0])
		}
		return usageErrorf("%s (see %s --help)", msg, cmd.CommandPath())
	}
	return cmd.Help()
}

// describeDefault shows a flag's default in its help line as words, for
// defaults such as -1 that stand for something ("(default all)").
func describeDefault(cmd *cobra.Command, name, words string) {
	cmd.Flags().Lookup(name).DefValue = words
}

// exactArgs is cobra.ExactArgs with a message that names what is missing.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < len(names):
			return usageErrorf("missing %s (usage: %s)", strings.ToUpper(names[len(args)]), cmd.UseLine())
		case len(args) > len(names):
			return usageErrorf("unexpected argument %q (usage: %s)", args[len(names)], cmd.UseLine())
		}
		return nil
	}
}
