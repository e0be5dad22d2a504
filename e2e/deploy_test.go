package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmedge/llmedge/internal/kubetest"
)

// deployDir holds the Kubernetes manifests, a kustomization.
const deployDir = "../deploy/kubernetes"

// needKube skips a test of the manifests when no kube-apiserver was built
// and LLMEDGE_TEST_KUBE does not ask for them (with it set, a missing
// binary fails the test, as under `make test`, which builds it).
func needKube(t *testing.T) {
	t.Helper()
	if os.Getenv("LLMEDGE_TEST_KUBE") != "" {
		return
	}
	bin := os.Getenv(kubetest.APIServerEnv)
	if bin == "" {
		bin = "../bin/kube-apiserver"
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("%s is missing (`make kube` builds it) and LLMEDGE_TEST_KUBE is unset: the manifests are not checked", bin)
	}
}

// kubectl runs kubectl as c's admin, returning stdout and stderr apart (the
// API server's warnings are on stderr).
func kubectl(t *testing.T, c *kubetest.Cluster, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(kubetest.Binary(t, "kubectl"), append([]string{"--kubeconfig", c.AdminKubeconfig}, args...)...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// kobj is what the test reads of the objects the API server answers.
type kobj struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Data     map[string]string `json:"data"`
	Spec     json.RawMessage   `json:"spec"`
	Rules    []kubeRule        `json:"rules"`
	Subjects []struct {
		Kind, Name, Namespace string
	} `json:"subjects"`
	RoleRef struct{ Kind, Name string } `json:"roleRef"`
}

type kubeRule struct {
	APIGroups []string `json:"apiGroups"`
	Resources []string `json:"resources"`
	Verbs     []string `json:"verbs"`
}

type kubeProbe struct {
	HTTPGet *struct {
		Path   string `json:"path"`
		Port   any    `json:"port"`
		Scheme string `json:"scheme"`
	} `json:"httpGet"`
}

type kubeDeployment struct {
	Replicas int `json:"replicas"`
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	Strategy struct {
		Type          string `json:"type"`
		RollingUpdate struct {
			MaxUnavailable any `json:"maxUnavailable"`
			MaxSurge       any `json:"maxSurge"`
		} `json:"rollingUpdate"`
	} `json:"strategy"`
	Template struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
		Spec struct {
			ServiceAccountName string `json:"serviceAccountName"`
			SecurityContext    struct {
				RunAsNonRoot *bool `json:"runAsNonRoot"`
				RunAsUser    *int  `json:"runAsUser"`
			} `json:"securityContext"`
			Containers []struct {
				Name    string   `json:"name"`
				Command []string `json:"command"`
				Args    []string `json:"args"`
				Ports   []struct {
					Name          string `json:"name"`
					ContainerPort int    `json:"containerPort"`
				} `json:"ports"`
				ReadinessProbe *kubeProbe `json:"readinessProbe"`
				LivenessProbe  *kubeProbe `json:"livenessProbe"`
				Resources      struct {
					Requests map[string]string `json:"requests"`
				} `json:"resources"`
				SecurityContext struct {
					AllowPrivilegeEscalation *bool `json:"allowPrivilegeEscalation"`
					ReadOnlyRootFilesystem   *bool `json:"readOnlyRootFilesystem"`
				} `json:"securityContext"`
				VolumeMounts []struct {
					Name      string `json:"name"`
					MountPath string `json:"mountPath"`
				} `json:"volumeMounts"`
			} `json:"containers"`
			Volumes []struct {
				Name      string `json:"name"`
				ConfigMap *struct {
					Name string `json:"name"`
				} `json:"configMap"`
				Secret *struct {
					SecretName string `json:"secretName"`
				} `json:"secret"`
			} `json:"volumes"`
		} `json:"spec"`
	} `json:"template"`
}

// dryRun applies the manifests (kubectl apply args) with
// --dry-run=server: the API server admits, validates and defaults every
// object as it would store it, and stores nothing. It fails the test on
// an error and returns the objects as the server answered them and its
// warnings.
func dryRun(t *testing.T, c *kubetest.Cluster, args ...string) ([]kobj, string) {
	t.Helper()
	out, stderr, err := kubectl(t, c, append([]string{"apply", "--dry-run=server", "-o", "json"}, args...)...)
	if err != nil {
		t.Fatalf("kubectl apply --dry-run=server %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	var list struct {
		Kind  string `json:"kind"`
		Items []kobj `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("kubectl's answer: %v\n%s", err, out)
	}
	if list.Kind != "List" {
		var one kobj
		_ = json.Unmarshal([]byte(out), &one)
		return []kobj{one}, stderr
	}
	return list.Items, stderr
}

// TestDeployManifests checks deploy/kubernetes with a real kube-apiserver:
// every object is accepted by `kubectl apply --dry-run=server -k`, without
// a warning (the namespace warns of what breaks the Pod Security
// `restricted` profile); the example replicas (a Deployment, a Service, an
// InferencePool) are accepted too; the ConfigMap is the Caddyfile that
// TestDeployCaddyfileValidates checks; the role lets the gateway read
// what its replica source reads and nothing else; and the Deployment runs
// the Dockerfile's image as the Dockerfile builds it.
func TestDeployManifests(t *testing.T) {
	needKube(t)
	c := kubetest.Start(t)
	c.InstallInferencePoolCRD(t)

	// The namespace for real: objects are dry-run into it, and its Pod
	// Security labels judge them.
	if _, stderr, err := kubectl(t, c, "apply", "-f", filepath.Join(deployDir, "namespace.yaml")); err != nil {
		t.Fatalf("namespace.yaml: %v\n%s", err, stderr)
	}
	objs, warnings := dryRun(t, c, "-k", deployDir)
	if strings.Contains(warnings, "Warning") {
		t.Errorf("the API server warns about the gateway's manifests:\n%s", warnings)
	}
	byKind := map[string][]kobj{}
	for _, o := range objs {
		byKind[o.Kind] = append(byKind[o.Kind], o)
		if o.Kind != "Namespace" && o.Metadata.Namespace != "llmedge" {
			t.Errorf("%s %s in namespace %q, want llmedge", o.Kind, o.Metadata.Name, o.Metadata.Namespace)
		}
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget"} {
		if len(byKind[k]) != 1 {
			t.Fatalf("%d objects of kind %s, want 1 (all: %v)", len(byKind[k]), k, byKind)
		}
	}
	if len(byKind["Secret"]) != 0 {
		t.Error("the manifests carry a Secret: secrets are the operator's, never committed")
	}
	// Nothing was stored.
	if _, _, err := kubectl(t, c, "get", "-n", "llmedge", "deployment", "llmedge"); err == nil {
		t.Error("the dry run created the Deployment")
	}

	caddyfile, err := os.ReadFile(deployCaddyfile)
	if err != nil {
		t.Fatal(err)
	}
	cm := byKind["ConfigMap"][0]
	if cm.Data["Caddyfile"] != string(caddyfile) {
		t.Error("the ConfigMap's Caddyfile is not deploy/kubernetes/Caddyfile")
	}

	var d kubeDeployment
	if err := json.Unmarshal(byKind["Deployment"][0].Spec, &d); err != nil {
		t.Fatal(err)
	}
	checkDeployment(t, d, cm.Metadata.Name, byKind["ServiceAccount"][0].Metadata.Name)
	checkSelectors(t, d, byKind)
	checkRole(t, c, byKind)

	// The examples: vLLM's Deployment and Service, and the InferencePool
	// (its CRD installed). Warnings are allowed: an engine's image runs as
	// root, which the namespace enforces no more than `baseline` against.
	ex, _ := dryRun(t, c, "-n", "llmedge", "-f", filepath.Join(deployDir, "examples", "vllm"))
	var kinds []string
	for _, o := range ex {
		kinds = append(kinds, o.Kind)
	}
	slices.Sort(kinds)
	if strings.Join(kinds, " ") != "Deployment InferencePool Service" {
		t.Errorf("the examples hold %v, want a Deployment, an InferencePool and a Service", kinds)
	}
}

// checkDeployment holds the gateway's Deployment to the Dockerfile and to
// what keeps capacity through a rollout.
func checkDeployment(t *testing.T, d kubeDeployment, configMap, serviceAccount string) {
	t.Helper()
	df, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if d.Replicas < 2 {
		t.Errorf("replicas %d: one gateway is a single point of failure", d.Replicas)
	}
	if d.Strategy.Type != "RollingUpdate" || fmt.Sprint(d.Strategy.RollingUpdate.MaxUnavailable) != "0" {
		t.Errorf("strategy %+v: a rollout must not lower capacity (maxUnavailable 0)", d.Strategy)
	}
	spec := d.Template.Spec
	if spec.ServiceAccountName != serviceAccount {
		t.Errorf("serviceAccountName %q, want %q", spec.ServiceAccountName, serviceAccount)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want the gateway's", len(spec.Containers))
	}
	ctr := spec.Containers[0]

	// The run line: the Dockerfile's CMD, its Caddyfile the ConfigMap's.
	m := regexp.MustCompile(`(?m)^CMD (\[.*\])$`).FindSubmatch(df)
	var cmd []string
	if m == nil || json.Unmarshal(m[1], &cmd) != nil {
		t.Fatal("the Dockerfile has no CMD in JSON form")
	}
	run := append(slices.Clone(ctr.Command), ctr.Args...)
	if len(run) > 0 && !slices.Equal(run, cmd) {
		t.Errorf("the container runs %q, the image %q", run, cmd)
	}
	config := cmd[slices.Index(cmd, "--config")+1]
	mounts := map[string]string{}
	for _, vm := range ctr.VolumeMounts {
		mounts[vm.MountPath] = vm.Name
	}
	volumes := map[string]string{}
	for _, v := range spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			volumes[v.Name] = "configmap/" + v.ConfigMap.Name
		case v.Secret != nil:
			volumes[v.Name] = "secret/" + v.Secret.SecretName
		}
	}
	if got := volumes[mounts[filepath.Dir(config)]]; got != "configmap/"+configMap {
		t.Errorf("%s is mounted from %q, want the ConfigMap %s", filepath.Dir(config), got, configMap)
	}
	// The Caddyfile's default folders are the Secrets'.
	for path, secret := range map[string]string{"/etc/llmedge/secrets": "secret/llmedge-secrets", "/etc/llmedge/tls": "secret/llmedge-tls"} {
		if got := volumes[mounts[path]]; got != secret {
			t.Errorf("%s is mounted from %q, want %s", path, got, secret)
		}
	}
	if v := regexp.MustCompile(`(?m)^VOLUME (\S+)`).FindSubmatch(df); v == nil || mounts[string(v[1])] == "" {
		t.Errorf("the image's VOLUME %s is not mounted (the root filesystem is read-only)", v)
	}

	// Its user, and nothing more.
	uid := regexp.MustCompile(`adduser .*-u (\d+)`).FindSubmatch(df)
	if spec.SecurityContext.RunAsNonRoot == nil || !*spec.SecurityContext.RunAsNonRoot ||
		spec.SecurityContext.RunAsUser == nil || uid == nil || fmt.Sprint(*spec.SecurityContext.RunAsUser) != string(uid[1]) {
		t.Errorf("the pod's user %+v, want runAsNonRoot and the image's uid %s", spec.SecurityContext, uid)
	}
	sc := ctr.SecurityContext
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container securityContext %+v: want a read-only root and no privilege escalation", sc)
	}
	if ctr.Resources.Requests["cpu"] == "" || ctr.Resources.Requests["memory"] == "" {
		t.Errorf("resource requests %v: want cpu and memory", ctr.Resources.Requests)
	}

	// The probes: /readyz and /healthz over HTTPS on the image's port.
	port := regexp.MustCompile(`LLMEDGE_PORT=(\d+)`).FindSubmatch(df)
	ports := map[string]int{}
	for _, p := range ctr.Ports {
		ports[p.Name] = p.ContainerPort
	}
	for name, pr := range map[string]struct {
		probe *kubeProbe
		path  string
	}{"readiness": {ctr.ReadinessProbe, "/readyz"}, "liveness": {ctr.LivenessProbe, "/healthz"}} {
		if pr.probe == nil || pr.probe.HTTPGet == nil {
			t.Errorf("no %s probe", name)
			continue
		}
		g := pr.probe.HTTPGet
		p := fmt.Sprint(g.Port)
		if n, ok := ports[p]; ok {
			p = fmt.Sprint(n)
		}
		if g.Path != pr.path || g.Scheme != "HTTPS" || port == nil || p != string(port[1]) {
			t.Errorf("%s probe %s %s port %s, want HTTPS %s on the image's LLMEDGE_PORT %s", name, g.Scheme, g.Path, p, pr.path, port)
		}
	}
}

// checkSelectors: the Service and the PodDisruptionBudget select the
// Deployment's pods, and the Service's port is the gateway's.
func checkSelectors(t *testing.T, d kubeDeployment, byKind map[string][]kobj) {
	t.Helper()
	matches := func(sel map[string]string) bool {
		if len(sel) == 0 {
			return false
		}
		for k, v := range sel {
			if d.Template.Metadata.Labels[k] != v {
				return false
			}
		}
		return true
	}
	var svc struct {
		Selector map[string]string `json:"selector"`
		Ports    []struct {
			TargetPort any `json:"targetPort"`
		} `json:"ports"`
	}
	_ = json.Unmarshal(byKind["Service"][0].Spec, &svc)
	if !matches(svc.Selector) || len(svc.Ports) != 1 || fmt.Sprint(svc.Ports[0].TargetPort) != "https" {
		t.Errorf("Service %+v: want the gateway's pods, on their port https", svc)
	}
	var pdb struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		MinAvailable   any `json:"minAvailable"`
		MaxUnavailable any `json:"maxUnavailable"`
	}
	_ = json.Unmarshal(byKind["PodDisruptionBudget"][0].Spec, &pdb)
	if !matches(pdb.Selector.MatchLabels) || !matches(d.Selector.MatchLabels) {
		t.Errorf("PodDisruptionBudget %+v or the Deployment's selector does not select the gateway's pods", pdb)
	}
	if fmt.Sprint(pdb.MaxUnavailable) != "1" && pdb.MinAvailable == nil {
		t.Errorf("PodDisruptionBudget %+v: want at most one pod down", pdb)
	}
}

// checkRole: the Role reads (get, list, watch) EndpointSlices, Pods and
// InferencePools and nothing else, and the API server's authorizer says
// so for the gateway's service account once the Role is in place.
func checkRole(t *testing.T, c *kubetest.Cluster, byKind map[string][]kobj) {
	t.Helper()
	role, binding := byKind["Role"][0], byKind["RoleBinding"][0]
	want := map[string]bool{"discovery.k8s.io/endpointslices": true, "/pods": true, "inference.networking.k8s.io/inferencepools": true}
	for _, r := range role.Rules {
		if !slices.Equal(r.Verbs, []string{"get", "list", "watch"}) {
			t.Errorf("rule %+v: verbs other than get, list, watch", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				if !want[g+"/"+res] {
					t.Errorf("rule %+v: %s/%s is not the replica source's", r, g, res)
				}
				delete(want, g+"/"+res)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("the Role does not let the source read %v", want)
	}
	sa := byKind["ServiceAccount"][0].Metadata.Name
	if binding.RoleRef.Name != role.Metadata.Name || len(binding.Subjects) != 1 ||
		binding.Subjects[0].Kind != "ServiceAccount" || binding.Subjects[0].Name != sa || binding.Subjects[0].Namespace != "llmedge" {
		t.Errorf("RoleBinding %+v does not bind %s to llmedge/%s", binding, role.Metadata.Name, sa)
	}

	// For real, to ask the authorizer.
	if _, stderr, err := kubectl(t, c, "apply", "-n", "llmedge", "-f", filepath.Join(deployDir, "rbac.yaml")); err != nil {
		t.Fatalf("rbac.yaml: %v\n%s", err, stderr)
	}
	as := "system:serviceaccount:llmedge:" + sa
	for _, q := range []struct {
		verb, resource, ns string
		allowed            bool
	}{
		{"watch", "endpointslices.discovery.k8s.io", "llmedge", true},
		{"list", "pods", "llmedge", true},
		{"get", "inferencepools.inference.networking.k8s.io", "llmedge", true},
		{"create", "endpointslices.discovery.k8s.io", "llmedge", false},
		{"update", "pods", "llmedge", false},
		{"get", "secrets", "llmedge", false},
		{"list", "pods", "default", false},
	} {
		out, _, _ := kubectl(t, c, "auth", "can-i", q.verb, q.resource, "-n", q.ns, "--as", as)
		if got := strings.TrimSpace(out) == "yes"; got != q.allowed {
			t.Errorf("%s may %s %s in %s: %q, want allowed=%v", as, q.verb, q.resource, q.ns, strings.TrimSpace(out), q.allowed)
		}
	}
}

// TestDeployManifestsRefused: the same dry run refuses what only the API
// server knows is wrong (a rollout that can make no progress: neither a
// pod down nor one more), so TestDeployManifests' check can fail.
func TestDeployManifestsRefused(t *testing.T) {
	needKube(t)
	c := kubetest.Start(t)
	dir := t.TempDir()
	for _, name := range []string{"kustomization.yaml", "namespace.yaml", "serviceaccount.yaml", "rbac.yaml", "deployment.yaml", "service.yaml", "pdb.yaml", "Caddyfile"} {
		b, err := os.ReadFile(filepath.Join(deployDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "deployment.yaml" {
			if !bytes.Contains(b, []byte("maxSurge: 1")) {
				t.Fatal("deployment.yaml has no maxSurge: 1 to break")
			}
			b = bytes.Replace(b, []byte("maxSurge: 1"), []byte("maxSurge: 0"), 1)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, stderr, err := kubectl(t, c, "apply", "-f", filepath.Join(dir, "namespace.yaml")); err != nil {
		t.Fatalf("namespace.yaml: %v\n%s", err, stderr)
	}
	_, stderr, err := kubectl(t, c, "apply", "--dry-run=server", "-k", dir)
	if err == nil || !strings.Contains(stderr, "maxUnavailable") {
		t.Fatalf("a Deployment with maxUnavailable 0 and maxSurge 0 was accepted (err %v):\n%s", err, stderr)
	}
}

// TestDeployPodFindsReplicas runs a gateway pod against a real API server
// with what the manifests give it: the kustomization applied for real
// (no controller runs its Deployment, the gateway runs here), the example
// vLLM Service with the EndpointSlice an endpoint controller would write
// for one ready pod, and the service account's own token (what the
// kubelet mounts). The ConfigMap's Caddyfile, with the Role of rbac.yaml
// and nothing more, finds the replica.
func TestDeployPodFindsReplicas(t *testing.T) {
	needKube(t)
	needBinaries(t)
	c := kubetest.Start(t)
	if _, stderr, err := kubectl(t, c, "apply", "-f", filepath.Join(deployDir, "namespace.yaml")); err != nil {
		t.Fatalf("namespace.yaml: %v\n%s", err, stderr)
	}
	for _, args := range [][]string{
		{"apply", "-k", deployDir},
		{"apply", "-n", "llmedge", "-f", filepath.Join(deployDir, "examples", "vllm", "vllm.yaml")},
	} {
		if _, stderr, err := kubectl(t, c, args...); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
	}
	c.Apply(t, `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: vllm-qwen-abcde
  namespace: llmedge
  labels: {kubernetes.io/service-name: vllm-qwen}
addressType: IPv4
ports: [{name: http, port: 8000, protocol: TCP}]
endpoints:
  - addresses: [10.77.0.11]
    conditions: {ready: true}
`)
	token, stderr, err := kubectl(t, c, "create", "token", "llmedge", "-n", "llmedge")
	if err != nil {
		t.Fatalf("a token of the service account: %v\n%s", err, stderr)
	}
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, []byte(kubetest.Kubeconfig(c.URL, c.CAFile, "llmedge", strings.TrimSpace(token), "llmedge")), 0o600); err != nil {
		t.Fatal(err)
	}
	g := startPod(t, makePodFiles(t, dir), kc)

	var model map[string]any
	if !pollEvery(30*time.Second, 100*time.Millisecond, func() bool {
		resp, err := http.Get(g.Admin + "/llmedge/readyz")
		if err != nil {
			return false
		}
		var r struct {
			Models map[string]map[string]any `json:"models"`
		}
		_ = json.Unmarshal([]byte(readAllString(resp)), &r)
		model = r.Models["qwen"]
		return model["source"] == "kubernetes" && model["synced"] == true && fmt.Sprint(model["replicas"]) == "1"
	}) {
		t.Fatalf("the pod's model qwen did not find the Service's replica: %v\n%s", model, lastLines(g.log.String(), 30))
	}
	if strings.Contains(g.log.String(), "forbidden") {
		t.Errorf("the API refused the service account something:\n%s", lastLines(g.log.String(), 30))
	}
}
