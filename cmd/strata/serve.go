package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/console"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/rpc"
)

// shutdownGrace bounds how long SIGTERM waits for in-flight calls (open fetch
// streams included) before closing them.
const shutdownGrace = 10 * time.Second

// readyWait bounds how long /readyz waits for the partitions to catch up
// with a metadata change before it answers that they lag: well within the
// timeout of any prober.
const readyWait = 2 * time.Second

func newServeCommand() *cobra.Command {
	var configFile string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a broker",
		Long: `Run a broker. Settings come from defaults, then the YAML file given with
--config, then STRATA_* environment variables, then flags; every flag below
has an environment variable of the same name in capitals with underscores,
prefixed STRATA_ (--node-id is STRATA_NODE_ID).

With --read-replica the broker is a read-only replica of a bucket (and
--object-store-prefix) that another cluster writes: it joins no cluster
(the raft and gossip settings are unused), writes nothing to the object
store, and serves fetches, offsets, metadata and topic descriptions of
every topic in the bucket, re-reading the manifests every
--read-replica-refresh; writes are refused with READ_REPLICA.

The admin listener (--admin-listen) serves the operator console at /ui
(open http://<admin-listen>/ui in a browser; https with TLS, where it
takes a client certificate or a token), Prometheus metrics at /metrics,
and /healthz and /readyz for probes.

On SIGTERM or SIGINT the broker stops accepting calls, lets in-flight ones
finish, fsyncs and closes its logs.

On SIGHUP it reads its settings again (file, environment and flags, as at
start) and applies those that can change while it runs:
tiering.cold_read_bytes_per_sec and tiering.cold_read_gets_per_sec. It
logs what it applied, and which other changed settings need a restart;
settings that do not load or validate change nothing.`,
		Example: `  # one broker on loopback, data in ./data
  strata serve

  # from a config file, with one setting overridden
  strata serve --config strata.yaml --node-id 2

  # a read-only replica of the bucket a cluster writes under prefix prod
  STRATA_OBJECT_STORE_SECRET_KEY=... strata serve --read-replica --listen 127.0.0.1:7410 \
    --admin-listen 127.0.0.1:7413 --object-store-type s3 --object-store-bucket strata \
    --object-store-endpoint http://127.0.0.1:9000 --object-store-access-key strata \
    --object-store-prefix prod`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			load := func() (config.Broker, error) { return config.Load(configFile, os.LookupEnv, cmd.Flags()) }
			cfg, err := load()
			if err != nil {
				return err
			}
			return serve(cmd, cfg, load)
		},
	}
	cmd.Flags().StringVar(&configFile, "config", "", "YAML config file")
	config.BindFlags(cmd.Flags())
	return cmd
}

// serve runs a broker with cfg until SIGTERM or SIGINT; load reads the
// settings again on SIGHUP.
func serve(cmd *cobra.Command, cfg config.Broker, load func() (config.Broker, error)) error {
	logger := newLogger(cfg.Log, cmd.ErrOrStderr())
	tuneGC()
	for _, name := range config.UnknownEnv(os.Environ()) {
		if !slices.Contains(clientEnv, name) { // the client commands' variables are not broker settings
			logger.Warn("ignoring unknown environment variable", "name", name)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// Taken from the start, so that a SIGHUP while the broker starts is a
	// reload once it runs rather than the end of the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	sec, err := loadSecurity(cfg.Security, logger)
	if err != nil {
		lis.Close()
		return err
	}
	// The Kafka listener opens before the broker starts, so the broker
	// publishes the address clients are told (an ephemeral port resolved)
	// in the cluster metadata for every broker's Metadata answers.
	kafkaLis, kafkaAdv, err := listenKafka(cfg)
	if err != nil {
		lis.Close()
		return err
	}
	if kafkaLis != nil {
		cfg.Kafka.Advertise = kafkaAdv
	}
	// The admin listener too opens before the broker starts: a port that
	// is taken fails the start at once, not after the broker has joined.
	adminLis, err := listenAdmin(cfg.Admin)
	if err != nil {
		closeListeners(lis, kafkaLis)
		return err
	}
	opts := []broker.Option{broker.WithVersion(version)}
	if sec != nil {
		opts = append(opts, broker.WithRaftTLS(sec.raftTLS()), broker.WithProducerIDKey(sec.producerIDKey(cfg.Gossip)))
	}
	b, err := broker.Start(ctx, cfg, logger, rpc.NewPeers(sec.material(), cfg.Security.ClusterName), opts...)
	if err != nil {
		closeListeners(lis, kafkaLis, adminLis)
		return err
	}
	auth := sec.auth(b, logger)
	if auth != nil {
		auth.OnDenied = b.RequestMetrics().Denied // strata_auth_denials_total
	}
	srv := rpc.NewServer(b, auth)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()

	admin := serveAdmin(cfg.Admin, adminLis, b, auth, logger)
	if admin != nil {
		defer admin.Close()
	}
	kafkaSrv, err := serveKafka(kafkaLis, kafkaAdv, cfg, b, auth, logger)
	if err != nil {
		srv.Stop()
		b.Close()
		return err
	}

	dataDir, _ := filepath.Abs(cfg.DataDir)
	mode := "TLS, clients authenticate and are held to ACLs"
	if sec == nil {
		mode = "plaintext without authentication: loopback only (set security.tls.* to change that)"
		if cfg.Security.AllowPlaintext {
			mode = "plaintext without authentication (security.allow_plaintext): anyone who reaches it may do anything"
		}
	}
	cold := broker.StoreLocation(cfg)
	if cold == "" {
		cold = "none (object_store.type none)"
	}
	adminAt := "off (admin.listen empty)"
	if admin != nil {
		scheme := "http"
		if auth != nil {
			scheme = "https"
		}
		adminAt = scheme + "://" + admin.Addr + " (console at /ui; /metrics, /healthz, /readyz)"
	}
	if b.ReadReplica() {
		fmt.Fprintf(cmd.OutOrStdout(), "strata %s: broker %d serving gRPC on %s as a read-only replica of %s; admin on %s; %s\n",
			version, cfg.NodeID, lis.Addr(), cold, adminAt, mode)
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "strata %s: broker %d serving gRPC on %s (raft %s), data in %s, cold tier %s; admin on %s; %s\n",
			version, cfg.NodeID, lis.Addr(), b.RaftAddr(), dataDir, cold, adminAt, mode)
	}
	if kafkaSrv != nil {
		fmt.Fprintf(cmd.OutOrStdout(), "strata %s: broker %d serving Kafka on %s (advertised as %s); %s\n",
			version, cfg.NodeID, kafkaLis.Addr(), kafkaAdv, kafkaMode(cfg, auth))
	}

	for running := true; running; {
		select {
		case <-ctx.Done():
			logger.Info("shutting down")
			running = false
		case err := <-served:
			if kafkaSrv != nil {
				kafkaSrv.Close()
			}
			b.Close()
			return fmt.Errorf("gRPC server stopped: %w", err)
		case <-hup:
			reload(b, load, logger)
		}
	}
	if kafkaSrv != nil {
		kafkaSrv.Close() // Kafka clients reconnect and retry; in-flight requests are cut off
	}
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(shutdownGrace):
		logger.Warn("in-flight calls did not finish in time; closing them", "grace", shutdownGrace)
		srv.Stop()
	}
	if err := b.Close(); err != nil {
		return err
	}
	logger.Info("stopped")
	return nil
}

// reload applies the settings load reads now to b, as far as they can
// change while it runs, and logs the outcome.
func reload(b *broker.Broker, load func() (config.Broker, error), logger *slog.Logger) {
	next, err := load()
	if err != nil {
		logger.Error("SIGHUP: settings not reloaded; nothing changed", "err", err)
		return
	}
	applied, restart := b.Reload(next)
	logger.Info("SIGHUP: settings reloaded", "applied", applied, "need_restart", restart)
}

// listenKafka opens the Kafka listener on cfg.Kafka.Listen, unless it is
// empty (nil listener), and returns it with the address clients are to be
// told.
func listenKafka(cfg config.Broker) (net.Listener, string, error) {
	if cfg.Kafka.Listen == "" {
		return nil, "", nil
	}
	lis, err := net.Listen("tcp", cfg.Kafka.Listen)
	if err != nil {
		return nil, "", fmt.Errorf("kafka listen on %s: %w", cfg.Kafka.Listen, err)
	}
	adv := cfg.Kafka.AdvertiseAddr()
	if host, port, _ := net.SplitHostPort(adv); port == "0" {
		// An ephemeral listen port: tell clients the one the kernel chose.
		_, chosen, _ := net.SplitHostPort(lis.Addr().String())
		adv = net.JoinHostPort(host, chosen)
	}
	return lis, adv, nil
}

// serveKafka serves the Kafka-protocol front end on lis (listenKafka's),
// unless it is nil (nil server). With auth (TLS on) it speaks TLS with
// the broker's certificate and holds clients to the same rules as gRPC
// (auth.Policy): a client authenticates with a client certificate, which
// the handshake requires unless kafka.sasl_mechanisms offers SASL.
func serveKafka(lis net.Listener, adv string, cfg config.Broker, b *broker.Broker, auth *rpc.Auth, logger *slog.Logger) (*kafka.Server, error) {
	if lis == nil {
		return nil, nil
	}
	kc := kafka.Config{Advertise: adv, Logger: logger,
		MaxConnections: cfg.Kafka.MaxConnections, MaxConnectionsPerIP: cfg.Kafka.MaxConnectionsPerIP}
	if auth != nil {
		kc.Auth, kc.SASL = auth.Policy(), cfg.Kafka.SASLMechanisms
		kc.TLS = auth.Material.ServerConfig(len(kc.SASL) == 0, nil)
	}
	srv, err := kafka.NewServer(b, kc)
	if err != nil {
		lis.Close()
		return nil, err
	}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, kafka.ErrClosed) {
			logger.Error("Kafka listener stopped", "err", err)
		}
	}()
	return srv, nil
}

// kafkaMode says how the Kafka listener authenticates, for the start-up
// line.
func kafkaMode(cfg config.Broker, auth *rpc.Auth) string {
	switch {
	case auth == nil:
		return "plaintext without authentication"
	case len(cfg.Kafka.SASLMechanisms) == 0:
		return "TLS, clients authenticate with a client certificate"
	}
	return "TLS, clients authenticate with a client certificate or SASL " + strings.Join(cfg.Kafka.SASLMechanisms, ", ")
}

// listenAdmin opens the admin endpoint's listener on cfg.Listen; nil when
// it is empty (no admin endpoint).
func listenAdmin(cfg config.Admin) (net.Listener, error) {
	if cfg.Listen == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("admin listen on %s: %w", cfg.Listen, err)
	}
	return lis, nil
}

// closeListeners closes the listeners of a start that failed; nil ones
// (an endpoint turned off) are skipped.
func closeListeners(ls ...net.Listener) {
	for _, l := range ls {
		if l != nil {
			l.Close()
		}
	}
}

// serveAdmin serves the admin HTTP endpoint on lis (from listenAdmin),
// unless it is nil: /healthz answers 200 while the broker serves, /readyz 200 while it
// is ready for clients and 503 with the reason when it is not
// (broker.Ready), /metrics gives its counters in the Prometheus text
// format, /ui is the operator console (package console), and with
// cfg.Pprof /debug/pprof/ the Go profiler. With auth set it serves TLS,
// and /metrics and the profiler answer only brokers, superusers and
// cluster admins (a client certificate or a bearer token); the console
// holds each visitor to the API's authentication and ACLs; /healthz and
// /readyz stay open for health checks and load balancers.
func serveAdmin(cfg config.Admin, lis net.Listener, b *broker.Broker, auth *rpc.Auth, logger *slog.Logger) *http.Server {
	if lis == nil {
		return nil
	}
	guard := func(h http.HandlerFunc) http.HandlerFunc { return h }
	if auth != nil {
		lis = tls.NewListener(lis, auth.Material.ServerConfig(false, nil))
		guard = func(h http.HandlerFunc) http.HandlerFunc {
			return func(w http.ResponseWriter, r *http.Request) {
				if status, err := auth.AdminAllowed(r); err != nil {
					http.Error(w, err.Error(), status)
					return
				}
				h(w, r)
			}
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), readyWait)
		defer cancel()
		if err := b.Ready(ctx); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("GET /metrics", guard(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		b.WriteMetrics(w)
	}))
	var policy *broker.Auth
	if auth != nil {
		policy = auth.Policy()
	}
	ui := console.Handler(console.Deps{Source: b, Auth: policy, Logger: logger})
	mux.Handle(console.Prefix+"/", ui)
	mux.Handle("GET "+console.Prefix, http.RedirectHandler(console.Prefix+"/", http.StatusMovedPermanently))
	if cfg.Pprof {
		// go tool pprof https://<admin>/debug/pprof/profile
		mux.HandleFunc("/debug/pprof/", guard(pprof.Index))
		mux.HandleFunc("/debug/pprof/profile", guard(pprof.Profile))
		mux.HandleFunc("/debug/pprof/symbol", guard(pprof.Symbol))
		mux.HandleFunc("/debug/pprof/trace", guard(pprof.Trace))
	}
	// Addr is the address listened on (a port 0 resolved), for the start
	// line; Serve does not read it.
	srv := &http.Server{Addr: lis.Addr().String(), Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug)}
	go func() {
		if err := srv.Serve(lis); err != nil && err != http.ErrServerClosed {
			logger.Error("admin endpoint stopped", "err", err)
		}
	}()
	return srv
}

func newLogger(c config.Logging, w interface{ Write([]byte) (int, error) }) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.Level)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(c.Format, "json") {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
