package main

// compose.yaml's monitoring profile, checked without a Docker engine: the
// services it adds, what they mount, and that Prometheus, the certs
// service, the brokers and Grafana's provisioning agree with each other
// and with the dashboard.

import (
	"encoding/json"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// repoRoot is the repository, from this package's directory.
const repoRoot = "../.."

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Profiles    []string          `yaml:"profiles"`
	User        string            `yaml:"user"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Tmpfs       []string          `yaml:"tmpfs"`
	DependsOn   any               `yaml:"depends_on"`
}

// mounts returns the service's volumes as target -> source.
func (s composeService) mounts() map[string]string {
	out := map[string]string{}
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 {
			out[parts[1]] = parts[0]
		}
	}
	return out
}

// hostFile is where a container path of s is on this machine: the bind
// mount holding it, relative to the repository; "" when no bind mount
// does.
func (s composeService) hostFile(containerPath string) string {
	for target, source := range s.mounts() {
		if !strings.HasPrefix(source, "./") {
			continue
		}
		if rel, ok := strings.CutPrefix(containerPath, target); ok && (rel == "" || strings.HasPrefix(rel, "/")) {
			return filepath.Join(repoRoot, source, rel)
		}
	}
	return ""
}

// volumeFor is the named volume s mounts over containerPath, or "".
func (s composeService) volumeFor(containerPath string) string {
	for target, source := range s.mounts() {
		if !strings.HasPrefix(source, "./") && strings.HasPrefix(containerPath, target+"/") {
			return source
		}
	}
	return ""
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// TestComposeMonitoringProfile: the monitoring profile adds Prometheus and
// Grafana and nothing else starts differently; images are pinned; every
// file compose mounts exists; Prometheus scrapes every broker's admin
// listener over TLS with a certificate the certs service makes, as a user
// that may read its key; Grafana's datasource is that Prometheus, under
// the uid the dashboard's datasource variable defaults to, and its
// dashboard provider loads the dashboard from where compose mounts it.
func TestComposeMonitoringProfile(t *testing.T) {
	var c composeFile
	readYAML(t, filepath.Join(repoRoot, "compose.yaml"), &c)
	prom, ok := c.Services["prometheus"]
	if !ok {
		t.Fatal("compose.yaml has no prometheus service")
	}
	graf, ok := c.Services["grafana"]
	if !ok {
		t.Fatal("compose.yaml has no grafana service")
	}
	var brokers []string
	for name, s := range c.Services {
		switch name {
		case "prometheus", "grafana":
			if !slices.Equal(s.Profiles, []string{"monitoring"}) {
				t.Errorf("%s: profiles %q, want [monitoring]", name, s.Profiles)
			}
			image, tag, _ := strings.Cut(s.Image, ":")
			if image == "" || tag == "" || tag == "latest" {
				t.Errorf("%s: image %q is not pinned to a tag", name, s.Image)
			}
		default:
			if len(s.Profiles) > 0 {
				t.Errorf("%s: profiles %q: a plain docker compose up would not start it", name, s.Profiles)
			}
		}
		if s.Environment["STRATA_NODE_ID"] != "" {
			brokers = append(brokers, name)
		}
		for target, source := range s.mounts() {
			if strings.HasPrefix(source, "./") {
				if _, err := os.Stat(filepath.Join(repoRoot, source)); err != nil {
					t.Errorf("%s mounts %s on %s: %v", name, source, target, err)
				}
			} else if _, ok := c.Volumes[source]; !ok {
				t.Errorf("%s mounts volume %s, which compose.yaml does not declare", name, source)
			}
		}
	}
	slices.Sort(brokers)
	if len(brokers) != 3 {
		t.Fatalf("brokers %q", brokers)
	}

	// Prometheus: its configuration, as compose mounts it.
	configPath := "/etc/prometheus/prometheus.yml"
	for _, arg := range prom.Command {
		if v, ok := strings.CutPrefix(arg, "--config.file="); ok {
			configPath = v
		}
	}
	promFile := prom.hostFile(configPath)
	if promFile == "" {
		t.Fatalf("prometheus reads %s, which no bind mount provides", configPath)
	}
	var pc struct {
		ScrapeConfigs []struct {
			JobName   string `yaml:"job_name"`
			Scheme    string `yaml:"scheme"`
			TLSConfig struct {
				CAFile   string `yaml:"ca_file"`
				CertFile string `yaml:"cert_file"`
				KeyFile  string `yaml:"key_file"`
			} `yaml:"tls_config"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, promFile, &pc)
	if len(pc.ScrapeConfigs) != 1 {
		t.Fatalf("%s: %d scrape configs, want the brokers' alone", promFile, len(pc.ScrapeConfigs))
	}
	sc := pc.ScrapeConfigs[0]
	var targets []string
	for _, s := range sc.StaticConfigs {
		targets = append(targets, s.Targets...)
	}
	slices.Sort(targets)
	var want []string
	for _, name := range brokers {
		_, port, err := net.SplitHostPort(c.Services[name].Environment["STRATA_ADMIN_LISTEN"])
		if err != nil {
			t.Fatalf("%s: admin listener %q: %v", name, c.Services[name].Environment["STRATA_ADMIN_LISTEN"], err)
		}
		want = append(want, net.JoinHostPort(name, port))
	}
	if !slices.Equal(targets, want) {
		t.Errorf("prometheus scrapes %q, want every broker's admin listener %q", targets, want)
	}

	// The admin listener is TLS when the brokers have certificates; the
	// client certificate must be one the certs service writes, in the
	// volume it writes to, mounted in Prometheus.
	if c.Services[brokers[0]].Environment["STRATA_SECURITY_TLS_CERT_FILE"] != "" && sc.Scheme != "https" {
		t.Errorf("prometheus scrapes with scheme %q; the admin listener speaks TLS", sc.Scheme)
	}
	certs := c.Services["certs"]
	certsDir, client := "", ""
	for i, arg := range certs.Command {
		if i+1 < len(certs.Command) {
			switch arg {
			case "--dir":
				certsDir = certs.Command[i+1]
			case "--client":
				client = certs.Command[i+1]
			}
		}
	}
	certsVolume := certs.mounts()[certsDir]
	if certsVolume == "" || client == "" {
		t.Fatalf("certs service: command %q, volumes %q", certs.Command, certs.Volumes)
	}
	for file, written := range map[string]string{sc.TLSConfig.CAFile: "ca.pem",
		sc.TLSConfig.CertFile: "client-" + client + ".pem", sc.TLSConfig.KeyFile: "client-" + client + "-key.pem"} {
		vol := prom.volumeFor(file)
		if vol != certsVolume || path.Base(file) != written {
			t.Errorf("prometheus reads %s (volume %q); the certs service writes %s in volume %s", file, vol, written, certsVolume)
		}
	}
	if !slices.Contains(strings.Split(c.Services[brokers[0]].Environment["STRATA_SECURITY_SUPERUSERS"], ","), "User:"+client) {
		t.Errorf("User:%s, whose certificate prometheus shows, may not read the admin endpoint", client)
	}
	dockerfile, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(dockerfile), "\nUSER "+prom.User+"\n") {
		t.Errorf("prometheus runs as %q, not the user that owns the keys the certs service writes (Dockerfile's USER)", prom.User)
	}
	if !slices.Contains(prom.Tmpfs, "/prometheus") {
		t.Errorf("prometheus, as user %s, has no writable /prometheus: tmpfs %q", prom.User, prom.Tmpfs)
	}

	// Grafana: the datasource and the dashboard provider.
	provisioning := graf.hostFile("/etc/grafana/provisioning")
	if provisioning == "" {
		t.Fatal("grafana: nothing mounted on /etc/grafana/provisioning")
	}
	var ds struct {
		Datasources []struct {
			Name      string `yaml:"name"`
			UID       string `yaml:"uid"`
			Type      string `yaml:"type"`
			URL       string `yaml:"url"`
			IsDefault bool   `yaml:"isDefault"`
		} `yaml:"datasources"`
	}
	readYAML(t, filepath.Join(provisioning, "datasources", "prometheus.yaml"), &ds)
	if len(ds.Datasources) != 1 {
		t.Fatalf("%d datasources, want one", len(ds.Datasources))
	}
	d := ds.Datasources[0]
	if d.Type != "prometheus" || d.URL != "http://prometheus:9090" || !d.IsDefault || d.UID == "" {
		t.Errorf("datasource %+v: want the default, of type prometheus, at http://prometheus:9090", d)
	}
	var dp struct {
		Providers []struct {
			Type    string `yaml:"type"`
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, filepath.Join(provisioning, "dashboards", "strata.yaml"), &dp)
	if len(dp.Providers) != 1 || dp.Providers[0].Type != "file" {
		t.Fatalf("dashboard providers %+v, want one of type file", dp.Providers)
	}
	dashboard := graf.hostFile(dp.Providers[0].Options.Path + "/strata-dashboard.json")
	if same, err := sameFile(dashboard, dashboardPath); err != nil || !same {
		t.Fatalf("the provider loads %s, where compose mounts %q, not %s (%v)", dp.Providers[0].Options.Path, dashboard, dashboardPath, err)
	}
	if home := graf.hostFile(graf.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]); home != dashboard {
		t.Errorf("grafana's home dashboard is %q, not the Strata dashboard", home)
	}
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Templating struct {
			List []dashboardVariable `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(dash.Templating.List, func(v dashboardVariable) bool { return v.Name == "datasource" })
	if i < 0 {
		t.Fatal("the dashboard has no datasource variable")
	}
	if v := dash.Templating.List[i]; v.Type != "datasource" || v.Query != "prometheus" || v.Current.Value != d.UID {
		t.Errorf("the dashboard's datasource variable %+v; want prometheus datasources, defaulting to uid %q", v, d.UID)
	}
}

// dashboardVariable is what the compose test reads of a templating
// variable.
type dashboardVariable struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Query   any    `json:"query"`
	Current struct {
		Value any `json:"value"`
	} `json:"current"`
}

// sameFile reports whether a and b name one file.
func sameFile(a, b string) (bool, error) {
	if a == "" || b == "" {
		return false, nil
	}
	sa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(sa, sb), nil
}
