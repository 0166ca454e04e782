package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/logist/logist/internal/config"
)

// printConfig runs logistd --print-config with args and env, as the
// shipped deployment starts it: the settings must all be ones logistd
// takes, with values it accepts. It returns the effective settings.
func printConfig(t *testing.T, what string, args []string, env map[string]string) map[string]config.Source {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), append(append([]string{"logistd"}, args...), "--print-config"),
		func(k string) string { return env[k] }, &out, &errb)
	if code != 0 {
		t.Fatalf("%s: logistd %v: exit %d: %s", what, args, code, errb.String())
	}
	var src map[string]config.Source
	if err := json.Unmarshal(out.Bytes(), &src); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return src
}

// envFile reads KEY=VALUE lines as systemd's EnvironmentFile does.
func envFile(t *testing.T, p string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not KEY=VALUE", p, line)
		}
		env[k] = v
	}
	return env
}

// TestClusterSystemdUnits: the 3-node set-up's unit starts each node with
// its config file and the database URL from cluster.env; logistd accepts
// every setting; the nodes differ in id, folder and port.
func TestClusterSystemdUnits(t *testing.T) {
	const dir = "../../deploy/cluster"
	unit, err := os.ReadFile(filepath.Join(dir, "logistd-node@.service"))
	if err != nil {
		t.Fatal(err)
	}
	exec := regexp.MustCompile(`(?m)^ExecStart=(\S+) (.*)$`).FindStringSubmatch(string(unit))
	if exec == nil || filepath.Base(exec[1]) != "logistd" {
		t.Fatalf("no ExecStart running logistd in the unit")
	}
	if !strings.Contains(string(unit), "EnvironmentFile=/etc/logist/cluster.env") {
		t.Fatal("the unit does not read cluster.env")
	}
	env := envFile(t, filepath.Join(dir, "cluster.env"))
	if !strings.HasPrefix(env["LOGISTD_DATABASE_URL"], "postgres://") {
		t.Fatalf("cluster.env: LOGISTD_DATABASE_URL %q", env["LOGISTD_DATABASE_URL"])
	}
	seen := map[string]string{}
	for _, node := range []string{"node-a", "node-b", "node-c"} {
		args := strings.Fields(strings.ReplaceAll(exec[2], "/etc/logist/%i.json", filepath.Join(dir, node+".json")))
		src := printConfig(t, node, args, env)
		if src["node-id"].Value != node {
			t.Errorf("%s: node id %q", node, src["node-id"].Value)
		}
		if !strings.HasPrefix(src["database-url"].Origin, "env ") {
			t.Errorf("%s: database url from %s, want cluster.env", node, src["database-url"].Origin)
		}
		for _, k := range []string{"jobs-dir", "listen"} {
			if other, ok := seen[k+src[k].Value]; ok {
				t.Errorf("%s and %s share %s %s", node, other, k, src[k].Value)
			}
			seen[k+src[k].Value] = node
		}
	}
}

// TestKubernetesExample: the Deployment's container args and environment
// are settings logistd takes; the metrics port and probes match --listen.
func TestKubernetesExample(t *testing.T) {
	b, err := os.ReadFile("../../deploy/kubernetes/logistd-cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	y := string(b)
	if strings.Contains(y, "\t") {
		t.Fatal("a tab in YAML")
	}
	for _, want := range []string{"kind: Deployment", "replicas: 3", "path: /readyz", "path: /healthz", "containerPort: 9464",
		"terminationGracePeriodSeconds: 45"} {
		if !strings.Contains(y, want) {
			t.Errorf("the Deployment lacks %q", want)
		}
	}
	var args []string
	for _, m := range regexp.MustCompile(`(?m)^\s+- (--[a-z-]+=\S+)$`).FindAllStringSubmatch(y, -1) {
		args = append(args, m[1])
	}
	env := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s+- name: (LOGIST\w+)$`).FindAllStringSubmatch(y, -1) {
		env[m[1]] = "x"
	}
	env["LOGISTD_DATABASE_URL"] = "postgres://logist@db/logist"
	if len(args) < 3 || len(env) != 2 {
		t.Fatalf("args %v, env %v", args, env)
	}
	src := printConfig(t, "deployment", args, env)
	for k := range env {
		name := strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(k, "LOGISTD_"), "_", "-"))
		if src[name].Origin != "env "+k {
			t.Errorf("%s is not a setting logistd reads (%s: %+v)", k, name, src[name])
		}
	}
	if src["listen"].Value != "0.0.0.0:9464" {
		t.Errorf("--listen %q, want the container port", src["listen"].Value)
	}
}
