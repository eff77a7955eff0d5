package e2e

// The "run a cluster" tooling against the CLI and the configuration it
// drives: compose.yaml, the Dockerfile and scripts/run-cluster.sh. No Docker
// engine runs the tests, so they check that every variable, flag, value,
// address and port these files use is one the binary accepts, and run the
// compose health check against a real broker. `go test -run Compose` runs
// them all.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/strata-log/strata/config"
)

// composeService is the part of a compose service the checks read. Fields
// that compose accepts in two shapes (a list or a string, a map or a list)
// are decoded as any and normalised by the helpers below.
type composeService struct {
	Image       string         `yaml:"image"`
	Build       any            `yaml:"build"`
	Entrypoint  any            `yaml:"entrypoint"`
	Command     any            `yaml:"command"`
	Environment any            `yaml:"environment"`
	Healthcheck *composeHealth `yaml:"healthcheck"`
	DependsOn   any            `yaml:"depends_on"`
	Ports       []any          `yaml:"ports"`
	Volumes     []any          `yaml:"volumes"`

	env  map[string]string // Environment, normalised
	deps map[string]string // DependsOn: service -> condition
	id   int               // strata-N services: N
	cfg  config.Broker     // strata-N services: what config.Load made of env
}

type composeHealth struct {
	Test any `yaml:"test"`
}

type composeFile struct {
	Services map[string]*composeService `yaml:"services"`
	Volumes  map[string]any             `yaml:"volumes"`
}

var strataService = regexp.MustCompile(`^strata-([0-9]+)$`)

// loadCompose parses ../compose.yaml and normalises each service.
func loadCompose(t *testing.T) *composeFile {
	t.Helper()
	data, err := os.ReadFile("../compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	if len(f.Services) == 0 {
		t.Fatal("compose.yaml: no services")
	}
	for name, s := range f.Services {
		s.env = composeEnv(t, name, s.Environment)
		s.deps = composeDeps(t, name, s.DependsOn)
	}
	return &f
}

// strataServices returns the strata-N services, sorted by N.
func (f *composeFile) strataServices(t *testing.T) []string {
	t.Helper()
	var names []string
	for name, s := range f.Services {
		m := strataService.FindStringSubmatch(name)
		if m == nil {
			// A one-off strata command (the certs service) is no broker; its
			// command must still be a real one.
			if args := argv(s.Command); s.Build != nil && (len(args) == 0 || args[0] == "serve") {
				t.Errorf("service %s builds the strata image but is not named strata-N", name)
			} else if s.Build != nil {
				checkInvocation(t, "compose.yaml service "+name, args)
			}
			continue
		}
		s.id, _ = strconv.Atoi(m[1])
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int { return f.Services[a].id - f.Services[b].id })
	if len(names) == 0 {
		t.Fatal("compose.yaml: no strata-N service")
	}
	return names
}

// composeEnv reads environment as compose does: a map, or a list of
// KEY=VALUE. A variable without a value would come from the host, which a
// self-contained compose file must not need.
func composeEnv(t *testing.T, service string, v any) map[string]string {
	t.Helper()
	env := map[string]string{}
	switch v := v.(type) {
	case nil:
	case map[string]any:
		for k, val := range v {
			if val == nil {
				t.Errorf("%s: environment %s has no value (it would come from the host)", service, k)
				continue
			}
			env[k] = scalarString(val)
		}
	case []any:
		for _, item := range v {
			k, val, ok := strings.Cut(scalarString(item), "=")
			if !ok {
				t.Errorf("%s: environment entry %q has no value (it would come from the host)", service, k)
				continue
			}
			env[k] = val
		}
	default:
		t.Errorf("%s: environment is a %T, want a map or a list", service, v)
	}
	for k, val := range env {
		// Compose substitutes $VAR and ${VAR} from the host; $$ is a $.
		if strings.Contains(strings.ReplaceAll(val, "$$", ""), "$") {
			t.Errorf("%s: environment %s=%q takes a value from the host", service, k, val)
		}
		env[k] = strings.ReplaceAll(val, "$$", "$")
	}
	return env
}

// composeDeps reads depends_on as a list (condition service_started) or a
// map of service to {condition: ...}.
func composeDeps(t *testing.T, service string, v any) map[string]string {
	t.Helper()
	deps := map[string]string{}
	switch v := v.(type) {
	case nil:
	case []any:
		for _, d := range v {
			deps[scalarString(d)] = "service_started"
		}
	case map[string]any:
		for d, spec := range v {
			cond := "service_started"
			if m, ok := spec.(map[string]any); ok && m["condition"] != nil {
				cond = scalarString(m["condition"])
			}
			deps[d] = cond
		}
	default:
		t.Errorf("%s: depends_on is a %T, want a list or a map", service, v)
	}
	return deps
}

// scalarString formats a YAML scalar as compose passes it on: numbers and
// booleans as written.
func scalarString(v any) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// argv returns a command or entrypoint as an argument list; a string is
// split on spaces, as compose does for one without shell quoting.
func argv(v any) []string {
	switch v := v.(type) {
	case string:
		return strings.Fields(v)
	case []any:
		out := make([]string, len(v))
		for i, a := range v {
			out[i] = scalarString(a)
		}
		return out
	}
	return nil
}

// dockerfile is what the checks read from ../Dockerfile.
type dockerfile struct {
	froms      []string // images of the FROM lines, in order
	expose     map[int]bool
	env        map[string]string // ENV of the final stage
	entrypoint []string
	cmd        []string
	lines      []string // logical lines, continuations joined
}

func loadDockerfile(t *testing.T) *dockerfile {
	t.Helper()
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	d := &dockerfile{expose: map[int]bool{}}
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		d.lines = append(d.lines, line)
		instr, rest, _ := strings.Cut(line, " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			fields := strings.Fields(rest)
			for len(fields) > 0 && strings.HasPrefix(fields[0], "--") {
				fields = fields[1:]
			}
			if len(fields) == 0 {
				t.Fatalf("Dockerfile: %q", line)
			}
			d.froms = append(d.froms, fields[0])
			d.env = map[string]string{} // a new stage starts with its image's
		case "EXPOSE":
			for _, p := range strings.Fields(rest) {
				port, _, _ := strings.Cut(p, "/")
				n, err := strconv.Atoi(port)
				if err != nil {
					t.Fatalf("Dockerfile: EXPOSE %q", p)
				}
				d.expose[n] = true
			}
		case "ENV":
			for _, kv := range strings.Fields(rest) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("Dockerfile: write ENV as KEY=VALUE: %q", line)
				}
				d.env[k] = strings.Trim(v, `"`)
			}
		case "ENTRYPOINT", "CMD":
			var list []string
			if err := yaml.Unmarshal([]byte(rest), &list); err != nil || !strings.HasPrefix(rest, "[") {
				t.Fatalf("Dockerfile: %s must be in exec form (a JSON list; the runtime image has no shell): %q", instr, line)
			}
			if strings.EqualFold(instr, "ENTRYPOINT") {
				d.entrypoint = list
			} else {
				d.cmd = list
			}
		}
	}
	return d
}

// cliHelp is one command of the strata binary as its --help describes it.
type cliHelp struct {
	subcommands map[string]bool
	flags       map[string]bool // long names, and one-letter short names
}

var (
	helpMu    sync.Mutex
	helpCache = map[string]*cliHelp{}
)

var (
	helpFlag    = regexp.MustCompile(`^\s+(?:-([A-Za-z0-9]), )?--([a-z0-9][a-z0-9-]*)`)
	helpCommand = regexp.MustCompile(`^\s+([a-z][a-z0-9-]*)\s{2,}\S`)
)

// strataHelp runs `strata PATH... --help` and parses its subcommands and
// flags (global flags included).
func strataHelp(t *testing.T, path ...string) *cliHelp {
	t.Helper()
	key := strings.Join(path, " ")
	helpMu.Lock()
	defer helpMu.Unlock()
	if h, ok := helpCache[key]; ok {
		return h
	}
	cmd := exec.Command(strataBin(t), append(slices.Clone(path), "--help")...)
	cmd.Env = brokerEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("strata %s --help: %v\n%s", key, err, out)
	}
	h := &cliHelp{subcommands: map[string]bool{}, flags: map[string]bool{}}
	section := "" // "Available Commands:", "Flags:", "Global Flags:", ...
	for _, line := range strings.Split(string(out), "\n") {
		if line != "" && line[0] != ' ' {
			section = line
			continue
		}
		switch section {
		case "Available Commands:":
			if m := helpCommand.FindStringSubmatch(line); m != nil {
				h.subcommands[m[1]] = true
			}
		case "Flags:", "Global Flags:":
			if m := helpFlag.FindStringSubmatch(line); m != nil {
				h.flags[m[2]] = true
				if m[1] != "" {
					h.flags[m[1]] = true
				}
			}
		}
	}
	if len(h.flags) == 0 {
		t.Fatalf("strata %s --help: no flags found in:\n%s", key, out)
	}
	helpCache[key] = h
	return h
}

// checkInvocation checks one `strata ...` command line (args after the
// binary): the subcommands exist and every flag is a flag of the command
// they name. It returns the command path ("serve", "topic list").
func checkInvocation(t *testing.T, where string, args []string) string {
	t.Helper()
	var path []string
	h := strataHelp(t)
	i := 0
	for ; i < len(args) && h.subcommands[args[i]]; i++ {
		path = append(path, args[i])
		h = strataHelp(t, path...)
	}
	if len(path) == 0 {
		t.Errorf("%s: strata %s: no such command", where, strings.Join(args, " "))
		return ""
	}
	for _, a := range args[i:] {
		var name string
		switch {
		case a == "--" || a == "-":
			continue
		case strings.HasPrefix(a, "--"):
			name, _, _ = strings.Cut(a[2:], "=")
		case strings.HasPrefix(a, "-") && len(a) >= 2 && !isNumber(a):
			name = a[1:2]
		default:
			continue // a positional argument or a flag's value
		}
		if !h.flags[name] {
			t.Errorf("%s: strata %s has no flag %s", where, strings.Join(path, " "), a)
		}
	}
	return strings.Join(path, " ")
}

func isNumber(s string) bool { _, err := strconv.ParseFloat(s, 64); return err == nil }

// isStrata reports whether an argv[0] names the strata binary.
func isStrata(arg0 string) bool {
	arg0 = strings.Trim(arg0, `"'`+"`")
	return arg0 == "strata" || strings.HasSuffix(arg0, "/strata")
}

// portOf returns the port of a host:port.
func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%q: %v", addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("%q: %v", addr, err)
	}
	return n
}

// TestComposeServices checks compose.yaml against the configuration rules
// and the CLI: the brokers' variables and values load, their addresses name
// themselves, gossip reaches the others, ports and dependencies hold
// together.
// clientEnvNames are the client commands' variables, which compose sets
// for docker compose exec and the health check; they are not broker
// settings.
var clientEnvNames = []string{"STRATA_BROKER", "STRATA_TLS_CA", "STRATA_TLS_CERT", "STRATA_TLS_KEY", "STRATA_TOKEN"}

func TestComposeServices(t *testing.T) {
	f := loadCompose(t)
	df := loadDockerfile(t)
	names := f.strataServices(t)
	known := config.EnvNames()

	gossipAddr := map[string]string{} // service -> its gossip host:port as others dial it
	allLoaded := true
	for _, name := range names {
		s := f.Services[name]
		env := map[string]string{}
		for k, v := range df.env { // the image's ENV, which the service's override
			env[k] = v
		}
		for k, v := range s.env {
			env[k] = v
		}
		for k := range env {
			if strings.HasPrefix(k, "STRATA_") && !slices.Contains(clientEnvNames, k) && !slices.Contains(known, k) {
				t.Errorf("%s: %s is not a broker setting (config.EnvNames)", name, k)
			}
		}
		cfg, err := config.Load("", func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
		if err != nil {
			t.Errorf("%s: its environment does not load: %v", name, err)
			allLoaded = false
			continue
		}
		s.cfg = cfg
		if int(cfg.NodeID) != s.id {
			t.Errorf("%s: node id %d, want %d (the service's number)", name, cfg.NodeID, s.id)
		}
		// Others dial what is advertised: the service's own name, on the
		// port its listener has.
		if want := net.JoinHostPort(name, strconv.Itoa(portOf(t, cfg.Listen))); cfg.Advertise != want {
			t.Errorf("%s: advertise %q, want %q", name, cfg.Advertise, want)
		}
		if want := net.JoinHostPort(name, strconv.Itoa(portOf(t, cfg.Raft.Listen))); cfg.Raft.Advertise != want {
			t.Errorf("%s: raft advertise %q, want %q", name, cfg.Raft.Advertise, want)
		}
		// memberlist advertises IP addresses only (gossip.Config); empty
		// lets it pick the container's own.
		if adv := cfg.Gossip.Advertise; adv != "" {
			host, _, _ := net.SplitHostPort(adv)
			if net.ParseIP(host) == nil || portOf(t, adv) != portOf(t, cfg.Gossip.Listen) {
				t.Errorf("%s: gossip advertise %q: want empty, or an IP with the gossip listen port", name, adv)
			}
		}
		gossipAddr[name] = net.JoinHostPort(name, strconv.Itoa(portOf(t, cfg.Gossip.Listen)))
		if cfg.Gossip.BootstrapExpect != len(names) {
			t.Errorf("%s: gossip bootstrap expect %d, want %d (the strata services)", name, cfg.Gossip.BootstrapExpect, len(names))
		}
		listeners := []string{cfg.Listen, cfg.Raft.Listen, cfg.Gossip.Listen}
		if cfg.Admin.Listen != "" {
			listeners = append(listeners, cfg.Admin.Listen)
		}
		// Kafka: every broker serves it, advertised by its service name on
		// its Kafka port, with the same TLS and a way in for clients without
		// a certificate of their own (SCRAM users).
		if cfg.Kafka.Listen == "" {
			t.Errorf("%s: no Kafka listener (STRATA_KAFKA_LISTEN)", name)
		} else {
			listeners = append(listeners, cfg.Kafka.Listen)
			if want := net.JoinHostPort(name, strconv.Itoa(portOf(t, cfg.Kafka.Listen))); cfg.Kafka.AdvertiseAddr() != want {
				t.Errorf("%s: Kafka advertise %q, want %q", name, cfg.Kafka.AdvertiseAddr(), want)
			}
			if !cfg.Security.Enabled() || !slices.Contains(cfg.Kafka.SASLMechanisms, "SCRAM-SHA-512") {
				t.Errorf("%s: Kafka without TLS or SCRAM (security.tls.*, kafka.sasl_mechanisms %q)", name, cfg.Kafka.SASLMechanisms)
			}
		}
		for _, l := range listeners {
			if p := portOf(t, l); !df.expose[p] {
				t.Errorf("%s: listens on %s, but the Dockerfile does not EXPOSE %d", name, l, p)
			}
		}
		checkDataVolume(t, f, name, cfg.DataDir)
		checkObjectStore(t, f, name, cfg)

		// The command (or the image's) and the health check call real
		// commands with real flags.
		args := argv(s.Entrypoint)
		if args == nil {
			args = df.entrypoint
		}
		if cmd := argv(s.Command); cmd != nil {
			args = append(slices.Clone(args), cmd...)
		} else if s.Entrypoint == nil {
			args = append(slices.Clone(args), df.cmd...)
		}
		if len(args) == 0 || !isStrata(args[0]) {
			t.Errorf("%s: runs %q, want strata serve", name, args)
		} else if path := checkInvocation(t, name+" command", args[1:]); path != "serve" {
			t.Errorf("%s: runs strata %s, want strata serve", name, path)
		}
		checkStrataHealthcheck(t, name, s)
	}
	checkPorts(t, f)
	checkDependencies(t, f, names)
	if !allLoaded {
		return // the checks between brokers need every one's configuration
	}

	// Gossip: each broker joins through the others' gossip addresses by
	// service name. Not its own: a seed that is the broker itself counts as
	// a successful join, so a broker up before the others would stay alone.
	for _, name := range names {
		cfg := f.Services[name].cfg
		var want []string
		for _, other := range names {
			if other != name {
				want = append(want, gossipAddr[other])
			}
		}
		got := slices.Sorted(slices.Values(cfg.Gossip.Join))
		if !slices.Equal(got, want) {
			t.Errorf("%s: gossip join %q, want the other brokers' gossip addresses %q", name, got, want)
		}
	}
	// Node ids are unique (each matches its service number, checked above).
	ids := map[int32]string{}
	for _, name := range names {
		id := f.Services[name].cfg.NodeID
		if other, dup := ids[id]; dup {
			t.Errorf("%s and %s share node id %d", name, other, id)
		}
		ids[id] = name
	}
	// STRATA_BROKER, where the client commands in the containers go, names
	// brokers by their advertised gRPC addresses.
	for _, name := range names {
		v, ok := f.Services[name].env["STRATA_BROKER"]
		if !ok {
			continue
		}
		for _, addr := range strings.Split(v, ",") {
			host, _, err := net.SplitHostPort(strings.TrimSpace(addr))
			other, isSvc := f.Services[host]
			if err != nil || !isSvc || other.cfg.Advertise != strings.TrimSpace(addr) {
				t.Errorf("%s: STRATA_BROKER names %q, which is no broker's advertised gRPC address", name, addr)
			}
		}
	}
}

// checkStrataHealthcheck: the runtime image has no shell, so the test must
// be the exec form running strata, with real flags.
func checkStrataHealthcheck(t *testing.T, name string, s *composeService) {
	t.Helper()
	if s.Healthcheck == nil {
		t.Errorf("%s: no healthcheck", name)
		return
	}
	if _, ok := s.Healthcheck.Test.([]any); !ok { // a string runs in a shell
		t.Errorf("%s: healthcheck test %v: want [\"CMD\", \"strata\", ...] (the image has no shell)", name, s.Healthcheck.Test)
		return
	}
	args := argv(s.Healthcheck.Test)
	if len(args) < 2 || args[0] != "CMD" || !isStrata(args[1]) {
		t.Errorf("%s: healthcheck test %q: want [\"CMD\", \"strata\", ...] (the image has no shell)", name, args)
		return
	}
	checkInvocation(t, name+" healthcheck", args[2:])
}

// checkDataVolume: the data dir is a named volume declared at the top.
func checkDataVolume(t *testing.T, f *composeFile, name, dataDir string) {
	t.Helper()
	for _, v := range f.Services[name].Volumes {
		src, target, _ := strings.Cut(scalarString(v), ":")
		target, _, _ = strings.Cut(target, ":") // drop :ro and the like
		if target != dataDir {
			continue
		}
		if _, ok := f.Volumes[src]; !ok {
			t.Errorf("%s: %s is mounted from %q, which is not a named volume of the file", name, dataDir, src)
		}
		return
	}
	t.Errorf("%s: no volume is mounted at its data dir %s", name, dataDir)
}

// checkObjectStore: an s3 endpoint names a service of the file, and that
// bucket is created before the broker starts, or by the broker.
func checkObjectStore(t *testing.T, f *composeFile, name string, cfg config.Broker) {
	t.Helper()
	o := cfg.ObjectStore
	if o.Type != config.ObjectStoreS3 {
		return
	}
	u, err := url.Parse(o.Endpoint)
	if err != nil || f.Services[u.Hostname()] == nil {
		t.Errorf("%s: object store endpoint %q is not a service of the file", name, o.Endpoint)
	}
	if o.CreateBucket {
		return
	}
	for dep := range f.Services[name].deps {
		if d := f.Services[dep]; d != nil && slices.ContainsFunc(argv(d.Command), func(a string) bool { return strings.HasSuffix(a, "/"+o.Bucket) }) {
			return
		}
	}
	t.Errorf("%s: nothing it depends on creates bucket %q, and it does not create it itself", name, o.Bucket)
}

// checkPorts: every published host port is taken once, and a broker
// publishes its gRPC listener.
func checkPorts(t *testing.T, f *composeFile) {
	t.Helper()
	hostPorts := map[string]string{}
	for name, s := range f.Services {
		for _, p := range s.Ports {
			spec, ok := p.(string)
			if !ok {
				t.Errorf("%s: port %v: use the short syntax [ip:]host:container", name, p)
				continue
			}
			spec, proto, _ := strings.Cut(spec, "/")
			parts := strings.Split(spec, ":")
			if len(parts) < 2 {
				t.Errorf("%s: port %q publishes a random host port", name, spec)
				continue
			}
			host, container := parts[len(parts)-2], parts[len(parts)-1]
			key := host + "/" + orDefault(proto, "tcp")
			if other, dup := hostPorts[key]; dup {
				t.Errorf("host port %s is published by both %s and %s", key, name, other)
			}
			hostPorts[key] = name
			if s.id > 0 && s.cfg.Listen != "" && container != strconv.Itoa(portOf(t, s.cfg.Listen)) {
				t.Errorf("%s: publishes container port %s, want its gRPC port %d", name, container, portOf(t, s.cfg.Listen))
			}
		}
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// checkDependencies: every dependency is a service with a real condition;
// no broker waits for another to be healthy, since a broker is healthy only
// once the cluster has formed, which needs all of them up.
func checkDependencies(t *testing.T, f *composeFile, brokers []string) {
	t.Helper()
	conditions := []string{"service_started", "service_healthy", "service_completed_successfully"}
	for name, s := range f.Services {
		for dep, cond := range s.deps {
			d, ok := f.Services[dep]
			switch {
			case !ok:
				t.Errorf("%s depends on %s, which is not a service", name, dep)
			case !slices.Contains(conditions, cond):
				t.Errorf("%s depends on %s with condition %q", name, dep, cond)
			case cond == "service_healthy" && d.Healthcheck == nil:
				t.Errorf("%s waits for %s to be healthy, which has no healthcheck", name, dep)
			case cond == "service_healthy" && slices.Contains(brokers, name) && slices.Contains(brokers, dep):
				t.Errorf("%s waits for %s to be healthy: neither can be before the cluster forms", name, dep)
			}
		}
	}
}

// TestComposeDockerfile checks the Dockerfile: its builder's Go matches
// go.mod, its runtime runs strata serve, its ENV is settings.
func TestComposeDockerfile(t *testing.T) {
	df := loadDockerfile(t)
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go ([0-9]+\.[0-9]+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod: no go directive")
	}
	goVersion := string(m[1])
	if len(df.froms) < 2 {
		t.Fatalf("Dockerfile: want a build stage and a runtime stage, have FROM %q", df.froms)
	}
	builder := df.froms[0]
	if v, ok := strings.CutPrefix(builder, "golang:"); !ok || (v != goVersion && !strings.HasPrefix(v, goVersion+".") && !strings.HasPrefix(v, goVersion+"-")) {
		t.Errorf("Dockerfile: builder %s, want golang:%s (go.mod)", builder, goVersion)
	}
	build := ""
	for _, l := range df.lines {
		if strings.Contains(l, "go build") {
			build = l
		}
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-X main.version=", "./cmd/strata"} {
		if !strings.Contains(build, want) {
			t.Errorf("Dockerfile: the go build line %q lacks %s", build, want)
		}
	}
	for k := range df.env {
		if strings.HasPrefix(k, "STRATA_") && !slices.Contains(config.EnvNames(), k) {
			t.Errorf("Dockerfile: ENV %s is not a broker setting", k)
		}
	}
	if len(df.entrypoint) != 1 || !isStrata(df.entrypoint[0]) {
		t.Errorf("Dockerfile: ENTRYPOINT %q, want [\"strata\"]", df.entrypoint)
	}
	if path := checkInvocation(t, "Dockerfile CMD", df.cmd); path != "serve" {
		t.Errorf("Dockerfile: CMD %q, want [\"serve\"]", df.cmd)
	}
	def := config.DefaultBroker()
	for _, addr := range []string{def.Listen, def.Raft.Listen, def.Gossip.Listen, def.Admin.Listen} {
		if p := portOf(t, addr); !df.expose[p] {
			t.Errorf("Dockerfile: does not EXPOSE %d (default %s)", p, addr)
		}
	}
}

// TestComposeHealthcheck runs strata-1's health check command against a
// real broker: it passes while the broker serves and fails, within its
// --timeout, once it is gone.
func TestComposeHealthcheck(t *testing.T) {
	f := loadCompose(t)
	names := f.strataServices(t)
	s := f.Services[names[0]]
	if s.Healthcheck == nil {
		t.Fatalf("%s: no healthcheck", names[0])
	}
	args := argv(s.Healthcheck.Test)
	if len(args) < 2 || args[0] != "CMD" || !isStrata(args[1]) {
		t.Fatalf("%s: healthcheck %q is not an exec-form strata command", names[0], args)
	}
	args = slices.Clone(args[2:])
	b := newBroker(t, 1)
	b.start()
	replaced := false
	for i := range args {
		if args[i] == "--broker" && i+1 < len(args) {
			args[i+1], replaced = b.addr, true
		}
	}
	if !replaced {
		t.Fatalf("healthcheck %q does not name its broker with --broker", args)
	}
	check := func() (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, strataBin(t), args...)
		// The containers set STRATA_BROKER to every broker; --broker wins.
		cmd.Env = append(brokerEnv(), "STRATA_BROKER=192.0.2.1:7400")
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			err = errors.New(err.Error() + ": " + string(out))
		}
		return time.Since(start), err
	}
	if _, err := check(); err != nil {
		t.Fatalf("healthcheck %q against a serving broker: %v", args, err)
	}
	b.stop()
	took, err := check()
	if err == nil {
		t.Fatalf("healthcheck %q passed with the broker stopped", args)
	}
	if took > 20*time.Second {
		t.Errorf("healthcheck took %s to fail; compose's timeout would cut it first", took)
	}
}

// TestComposeRunClusterScript checks scripts/run-cluster.sh without running
// it (it binds fixed ports): bash accepts it, and every strata command in it,
// the brokers' and the ones it prints, uses real commands and flags.
// The README's cluster section is checked the same way.
func TestComposeRunClusterScript(t *testing.T) {
	const script = "../scripts/run-cluster.sh"
	if out, err := exec.Command("bash", "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n %s: %v\n%s", script, err, out)
	}
	data, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	calls := strataCalls(t, "run-cluster.sh", string(data))
	serve := 0
	for _, c := range calls {
		if c.path != "serve" {
			continue
		}
		serve++
		for _, want := range []string{"--node-id", "--gossip-join", "--gossip-bootstrap-expect", "--object-store-create-bucket", "--object-store-type",
			"--security-tls-cert-file", "--gossip-secret-key", "--kafka-listen", "--kafka-advertise", "--kafka-sasl-mechanisms"} {
			if !slices.Contains(c.args, want) {
				t.Errorf("run-cluster.sh: strata serve without %s", want)
			}
		}
	}
	if serve == 0 {
		t.Error("run-cluster.sh: no strata serve command found")
	}
	if len(calls) < 4 {
		t.Errorf("run-cluster.sh: found %d strata commands, want serve and the ones it prints", len(calls))
	}

	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## A cluster\n")
	if !ok {
		t.Fatal("README.md: no \"## A cluster\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	if len(strataCalls(t, "README.md (A cluster)", section)) < 3 {
		t.Error("README.md (A cluster): fewer strata commands than expected")
	}
}

type strataCall struct {
	path string   // "serve", "topic create"
	args []string // after the binary
}

// strataCalls finds the strata commands in shell text or prose and checks
// each: a word strata (or .../strata) followed by a command, up to the end
// of the command (a pipe, redirection, separator or comment).
func strataCalls(t *testing.T, where, text string) []strataCall {
	t.Helper()
	top := strataHelp(t)
	var calls []strataCall
	text = strings.ReplaceAll(text, "\\\n", " ")
	for n, line := range strings.Split(text, "\n") {
		words := strings.Fields(strings.NewReplacer("`", " ", "(", " ", ")", " ").Replace(line))
		for i := 0; i+1 < len(words); i++ {
			if !isStrata(words[i]) || !top.subcommands[words[i+1]] {
				continue
			}
			var args []string
			for _, w := range words[i+1:] {
				if w == "|" || w == "||" || w == "&&" || w == "&" || w == ";" || strings.HasPrefix(w, ">") ||
					strings.HasPrefix(w, "2>") || strings.HasPrefix(w, "#") {
					break
				}
				args = append(args, strings.TrimRight(w, ";"))
			}
			path := checkInvocation(t, where+" line "+strconv.Itoa(n+1), args)
			calls = append(calls, strataCall{path: path, args: args})
		}
	}
	return calls
}
