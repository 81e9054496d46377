package deploycheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/sundialhq/sundial/pkg/config"
)

var chart = filepath.Join(repo, "deploy/helm/sundial")

// kubeVersion is the Kubernetes version the chart is rendered for (helm
// built with go install defaults to an old one).
const kubeVersion = "1.34.0"

// helm returns the helm binary: $HELM (make test-deploy sets it from
// scripts/install-helm.sh) or helm on PATH.
func helm(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	h, err := exec.LookPath("helm")
	if err != nil {
		t.Fatal("no helm: run `make test-deploy`, or set HELM=$(scripts/install-helm.sh)")
	}
	return h
}

func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helm(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errb.String())
	}
	return out.String(), nil
}

// decoder decodes YAML strictly (unknown or duplicate fields are errors)
// into the Kubernetes API types, plus the Prometheus Operator's.
func decoder(t *testing.T) runtime.Decoder {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := monitoringv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, s, s, kjson.SerializerOptions{Yaml: true, Strict: true})
}

// rendered is one `helm template` output, decoded.
type rendered struct {
	deployments map[string]*appsv1.Deployment // by component
	services    []*corev1.Service
	secrets     map[string]*corev1.Secret
	pdbs        []*policyv1.PodDisruptionBudget
	hpas        []*autoscalingv2.HorizontalPodAutoscaler
	ingresses   []*networkingv1.Ingress
	monitors    []*monitoringv1.ServiceMonitor
	rules       []*monitoringv1.PrometheusRule
	kinds       map[string]int
}

func render(t *testing.T, args ...string) *rendered {
	t.Helper()
	out, err := runHelm(t, append([]string{"template", "sundial", chart, "--namespace", "jobs", "--kube-version", kubeVersion}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	dec := decoder(t)
	r := &rendered{deployments: map[string]*appsv1.Deployment{}, secrets: map[string]*corev1.Secret{}, kinds: map[string]int{}}
	for i, doc := range strings.Split(out, "\n---\n") {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		obj, gvk, err := dec.Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("document %d does not decode strictly as a Kubernetes object: %v\n%s", i, err, doc)
		}
		r.kinds[gvk.Kind]++
		switch o := obj.(type) {
		case *appsv1.Deployment:
			r.deployments[o.Spec.Template.Labels["app.kubernetes.io/component"]] = o
		case *corev1.Service:
			r.services = append(r.services, o)
		case *corev1.Secret:
			r.secrets[o.Name] = o
		case *policyv1.PodDisruptionBudget:
			r.pdbs = append(r.pdbs, o)
		case *autoscalingv2.HorizontalPodAutoscaler:
			r.hpas = append(r.hpas, o)
		case *networkingv1.Ingress:
			r.ingresses = append(r.ingresses, o)
		case *monitoringv1.ServiceMonitor:
			r.monitors = append(r.monitors, o)
		case *monitoringv1.PrometheusRule:
			r.rules = append(r.rules, o)
		case *corev1.ServiceAccount:
		default:
			t.Errorf("unexpected %s in the chart", gvk.Kind)
		}
	}
	return r
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// chartCase is one set of values the chart must render and lint with.
type chartCase struct {
	name      string
	values    string // a file of deploy/helm/sundial/ci, or "" for the defaults
	redisMode string
	history   bool
	// Secrets the case expects to exist in the cluster: name → key → value.
	external map[string]map[string]string
}

var chartCases = []chartCase{
	{name: "defaults", redisMode: "standalone", history: true},
	{name: "sentinel", values: "sentinel-values.yaml", redisMode: "sentinel", history: true},
	{name: "cluster", values: "cluster-values.yaml", redisMode: "cluster", history: true},
	{name: "existing secrets", values: "existing-secrets-values.yaml", redisMode: "standalone", history: true,
		external: map[string]map[string]string{
			"sundial-redis":    {"url": "redis://:pw@redis-master.data:6379/0"},
			"sundial-mongodb":  {"uri": "mongodb://sundial:pw@mongo-0.mongo:27017,mongo-1.mongo:27017,mongo-2.mongo:27017/jobs?replicaSet=rs0&authSource=admin"},
			"sundial-api-keys": {"keys": "k1,k2"},
		}},
	{name: "everything on", values: "full-values.yaml", redisMode: "standalone", history: true,
		external: map[string]map[string]string{
			"sundial-oidc":    {"oidc-client-secret": "client-secret", "session-secret": "session-secret-0123456789"},
			"sundial-keyring": {"keyring": "k1:" + strings.Repeat("A", 43) + "=,k2:" + strings.Repeat("B", 43) + "="},
		}},
	{name: "history off", values: "history-off-values.yaml", redisMode: "standalone", history: false},
}

func (c chartCase) args() []string {
	if c.values == "" {
		return nil
	}
	return []string{"-f", filepath.Join(chart, "ci", c.values)}
}

func TestHelmLint(t *testing.T) {
	for _, c := range chartCases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"lint", "--strict", chart, "--kube-version", kubeVersion}, c.args()...)
			if _, err := runHelm(t, args...); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestHelmTemplate(t *testing.T) {
	img := loadImage(t)
	for _, c := range chartCases {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, c.args()...)
			for _, comp := range []string{"api", "worker", "poller"} {
				d := r.deployments[comp]
				if d == nil {
					t.Errorf("no %s Deployment", comp)
					continue
				}
				checkDeployment(t, c, img, r, comp, d)
			}
			checkSelectors(t, r)
			if len(r.deployments) != 3 {
				t.Errorf("Deployments %v, want api, worker and poller", keys(r.deployments))
			}
		})
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func checkDeployment(t *testing.T, c chartCase, img *image, r *rendered, comp string, d *appsv1.Deployment) {
	t.Helper()
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%s: want one container, have %d", comp, len(pod.Containers))
	}
	ctr := pod.Containers[0]
	if len(ctr.Command) != 1 || img.binaries[ctr.Command[0]] != "./services/"+comp {
		t.Errorf("%s: command %v is not the image's %s binary", comp, ctr.Command, comp)
	}
	psc, sc := pod.SecurityContext, ctr.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("%s: the pod must run as a non-root user: %+v", comp, psc)
	}
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: want a read-only root filesystem and no privilege escalation: %+v", comp, sc)
	}
	if ctr.Resources.Requests.Cpu().IsZero() || ctr.Resources.Requests.Memory().IsZero() || ctr.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s: want CPU and memory requests and a memory limit: %+v", comp, ctr.Resources)
	}

	// The environment the binary sees, secrets resolved, through pkg/config.
	env := map[string]string{}
	for k, v := range img.env {
		env[k] = v
	}
	for _, e := range ctr.Env {
		if _, dup := env[e.Name]; dup && img.env[e.Name] == "" {
			t.Errorf("%s: %s set twice", comp, e.Name)
		}
		env[e.Name] = resolveEnv(t, c, r, d.Name, e)
	}
	cfg := loadConfig(t, d.Name, env)
	if cfg == nil {
		return
	}
	if cfg.History != c.history {
		t.Errorf("%s: SUNDIAL_HISTORY=%v, want %v", comp, cfg.History, c.history)
	}
	checkRedisMode(t, comp, cfg.RedisURL, c.redisMode)

	// Probes on the port the process listens on.
	listen := cfg.HTTPAddr
	if comp != "api" {
		listen = cfg.MetricsAddr
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil || host != "0.0.0.0" {
		t.Errorf("%s: must listen on 0.0.0.0:<port> in a pod, not %q", comp, listen)
		return
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", ctr.LivenessProbe, "/healthz"}, {"readiness", ctr.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path {
			t.Errorf("%s: want a %s probe on %s", comp, p.name, p.path)
			continue
		}
		if cp := containerPort(ctr, p.probe.HTTPGet.Port.String()); strconv.Itoa(int(cp)) != port {
			t.Errorf("%s: %s probe port %s is container port %d, the process listens on %s", comp, p.name, p.probe.HTTPGet.Port.String(), cp, port)
		}
	}

	// Kubernetes must not kill a process that is still shutting down.
	grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	need := cfg.ShutdownTimeout
	if ctr.Lifecycle != nil && ctr.Lifecycle.PreStop != nil && ctr.Lifecycle.PreStop.Sleep != nil {
		need += time.Duration(ctr.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	if grace <= need {
		t.Errorf("%s: terminationGracePeriodSeconds %v must exceed preStop + SUNDIAL_SHUTDOWN_TIMEOUT (%v)", comp, grace, need)
	}
}

// resolveEnv gives an env entry's value as the kubelet would.
func resolveEnv(t *testing.T, c chartCase, r *rendered, where string, e corev1.EnvVar) string {
	t.Helper()
	switch {
	case e.ValueFrom == nil:
		return e.Value
	case e.ValueFrom.SecretKeyRef != nil:
		ref := e.ValueFrom.SecretKeyRef
		if s := r.secrets[ref.Name]; s != nil {
			if v, ok := s.StringData[ref.Key]; ok {
				return v
			}
			if v, ok := s.Data[ref.Key]; ok {
				return string(v)
			}
			t.Errorf("%s: %s refers to key %s, missing from the chart's Secret %s", where, e.Name, ref.Key, ref.Name)
			return ""
		}
		if v, ok := c.external[ref.Name][ref.Key]; ok {
			return v
		}
		t.Errorf("%s: %s refers to Secret %s key %s, which neither the chart nor the values provide", where, e.Name, ref.Name, ref.Key)
	case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
		return where + "-7d4b9c6f5-x2x9k"
	default:
		t.Errorf("%s: %s: unexpected valueFrom %+v", where, e.Name, e.ValueFrom)
	}
	return ""
}

func checkRedisMode(t *testing.T, comp, url, mode string) {
	t.Helper()
	o, err := config.RedisOptions(url)
	if err != nil {
		t.Errorf("%s: SUNDIAL_REDIS_URL: %v", comp, err)
		return
	}
	got := "standalone"
	switch {
	case o.MasterName != "":
		got = "sentinel"
	case o.IsClusterMode:
		got = "cluster"
	}
	if got != mode {
		t.Errorf("%s: SUNDIAL_REDIS_URL %q is %s, want %s", comp, config.Mask(url), got, mode)
	}
}

func containerPort(c corev1.Container, nameOrNumber string) int32 {
	for _, p := range c.Ports {
		if p.Name == nameOrNumber || strconv.Itoa(int(p.ContainerPort)) == nameOrNumber {
			return p.ContainerPort
		}
	}
	return 0
}

// checkSelectors follows every reference between the rendered objects:
// Service → pods and port, PDB → pods, HPA → Deployment, Ingress → Service,
// ServiceMonitor → Services and ports.
func checkSelectors(t *testing.T, r *rendered) {
	t.Helper()
	podsOf := func(sel map[string]string) []*appsv1.Deployment {
		var out []*appsv1.Deployment
		for _, comp := range keys(r.deployments) {
			d := r.deployments[comp]
			if len(sel) > 0 && labels.SelectorFromSet(sel).Matches(labels.Set(d.Spec.Template.Labels)) {
				out = append(out, d)
			}
		}
		return out
	}
	for _, d := range r.deployments {
		if !labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("Deployment %s: selector does not match its pods", d.Name)
		}
	}
	svcs := map[string]*corev1.Service{}
	for _, s := range r.services {
		svcs[s.Name] = s
		ds := podsOf(s.Spec.Selector)
		if len(ds) != 1 {
			t.Errorf("Service %s selects %d Deployments, want 1", s.Name, len(ds))
			continue
		}
		for _, p := range s.Spec.Ports {
			if containerPort(ds[0].Spec.Template.Spec.Containers[0], p.TargetPort.String()) == 0 {
				t.Errorf("Service %s: target port %s is not a port of %s", s.Name, p.TargetPort.String(), ds[0].Name)
			}
		}
	}
	for _, p := range r.pdbs {
		if len(podsOf(p.Spec.Selector.MatchLabels)) != 1 {
			t.Errorf("PodDisruptionBudget %s must select one Deployment's pods", p.Name)
		}
	}
	for _, h := range r.hpas {
		var target *appsv1.Deployment
		for _, d := range r.deployments {
			if d.Name == h.Spec.ScaleTargetRef.Name && h.Spec.ScaleTargetRef.Kind == "Deployment" {
				target = d
			}
		}
		if target == nil {
			t.Errorf("HPA %s scales %s, not a Deployment of the chart", h.Name, h.Spec.ScaleTargetRef.Name)
		} else if target.Spec.Replicas != nil {
			t.Errorf("Deployment %s sets replicas while HPA %s scales it (every upgrade would reset it)", target.Name, h.Name)
		}
	}
	for _, ing := range r.ingresses {
		for _, rule := range ing.Spec.Rules {
			for _, p := range rule.HTTP.Paths {
				s := svcs[p.Backend.Service.Name]
				if s == nil || !slices.ContainsFunc(s.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == p.Backend.Service.Port.Name }) {
					t.Errorf("Ingress %s: backend %s:%s is not a Service port of the chart", ing.Name, p.Backend.Service.Name, p.Backend.Service.Port.Name)
				}
			}
		}
	}
	for _, m := range r.monitors {
		for _, ep := range m.Spec.Endpoints {
			n := 0
			for _, s := range r.services {
				if labels.SelectorFromSet(m.Spec.Selector.MatchLabels).Matches(labels.Set(s.Labels)) &&
					slices.ContainsFunc(s.Spec.Ports, func(sp corev1.ServicePort) bool { return sp.Name == ep.Port }) {
					n++
				}
			}
			if n == 0 {
				t.Errorf("ServiceMonitor %s: no Service has port %s", m.Name, ep.Port)
			}
		}
	}
}

func TestHelmOptionalParts(t *testing.T) {
	def := render(t)
	full := render(t, chartCases[4].args()...)
	for _, kind := range []string{"Ingress", "HorizontalPodAutoscaler", "ServiceMonitor", "PrometheusRule"} {
		if def.kinds[kind] != 0 {
			t.Errorf("defaults render a %s; it is optional", kind)
		}
		if full.kinds[kind] != 1 {
			t.Errorf("%s renders %d %s, want 1", chartCases[4].values, full.kinds[kind], kind)
		}
	}
	if def.kinds["PodDisruptionBudget"] != 3 {
		t.Errorf("defaults: %d PodDisruptionBudgets, want one each for api, worker, poller", def.kinds["PodDisruptionBudget"])
	}
	if full.deployments["worker"].Spec.Replicas != nil {
		t.Error("an autoscaled worker Deployment must not set replicas")
	}
	// Inline API keys and a Redis password reach the processes intact.
	for _, want := range []struct{ key, value string }{{"api-keys", "key-one,key-two"}, {"redis-url", "rediss://sundial:p%40ss%20word@redis.internal.example.com:6380/2"}} {
		if got := full.secrets["sundial"].StringData[want.key]; got != want.value {
			t.Errorf("Secret key %s = %q, want %q", want.key, got, want.value)
		}
	}
	o, err := config.RedisOptions(full.secrets["sundial"].StringData["redis-url"])
	if err != nil || o.Username != "sundial" || o.Password != "p@ss word" || o.TLSConfig == nil || o.DB != 2 {
		t.Errorf("the Redis URL lost the user, password, TLS or db: %+v %v", o, err)
	}
	sent := render(t, chartCases[1].args()...)
	if o, err := config.RedisOptions(sent.secrets["sundial"].StringData["redis-url"]); err != nil || o.Password != "s3cret/with:odd@chars" || o.MasterName != "sundial" || len(o.Addrs) != 3 {
		t.Errorf("the Sentinel URL lost the password, master or nodes: %+v %v", o, err)
	}
	ext := render(t, chartCases[3].args()...)
	if len(ext.secrets) != 0 {
		t.Errorf("with every credential in existing Secrets the chart must make none, made %v", keys(ext.secrets))
	}
}

// TestHelmRefuses checks that values.schema.json and the templates stop
// mistakes at install time.
func TestHelmRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		set  []string
		want string
	}{
		{"typo at the top", []string{"replicaCount=3"}, "replicaCount"},
		{"typo in a component", []string{"worker.replica=3"}, "replica"},
		{"unknown variable", []string{"config.SUNDIAL_CONCURENCY=5"}, "SUNDIAL_CONCURENCY"},
		{"variable the chart sets itself", []string{"config.SUNDIAL_REDIS_URL=redis://x:6379"}, "SUNDIAL_REDIS_URL"},
		{"number instead of string", []string{"worker.config.SUNDIAL_CONCURRENCY=10"}, "SUNDIAL_CONCURRENCY"},
		{"unknown Redis mode", []string{"redis.mode=replicated"}, "mode"},
		{"cluster without nodes", []string{"redis.mode=cluster"}, "redis.cluster.nodes"},
		{"cluster with a password", []string{"redis.mode=cluster", "redis.cluster.nodes={a:6379}", "redis.password=x"}, "not supported"},
		{"sentinel node without port", []string{"redis.mode=sentinel", "redis.sentinel.nodes={sentinel}"}, "nodes"},
		{"open API and keys at once", []string{"apiKeys.allowOpen=true", "apiKeys.keys={k1}"}, "choose one"},
		{"history without MongoDB", []string{"mongodb.uri="}, "mongodb.uri"},
		{"not a MongoDB URI", []string{"mongodb.uri=postgres://x"}, "uri"},
		{"keyring primary without the keyring", []string{"encryption.primary=k2"}, "encryption.existingSecret"},
		{"invalid keyring primary", []string{"encryption.existingSecret=s", "encryption.primary=k 2"}, "primary"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"template", "sundial", chart, "--kube-version", kubeVersion}
			for _, s := range c.set {
				args = append(args, "--set", s)
			}
			if strings.Contains(c.name, "number") {
				args = append(args[:len(args)-2], "--set-json", `worker.config={"SUNDIAL_CONCURRENCY":10}`)
			}
			_, err := runHelm(t, args...)
			if err == nil {
				t.Fatalf("helm template %v succeeded; want a refusal naming %q", c.set, c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("refusal does not name %q:\n%v", c.want, err)
			}
		})
	}
}

// envOf returns the container env entry name of d, or nil.
func envOf(d *appsv1.Deployment, name string) *corev1.EnvVar {
	for i, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return &d.Spec.Template.Spec.Containers[0].Env[i]
		}
	}
	return nil
}

// TestHelmAPIKey: the chart runs no open API unless asked. With no key
// given it generates a random one into its Secret, which the API reads as
// SUNDIAL_API_KEYS (an Ingress then needs nothing more); apiKeys.allowOpen
// renders no key at all. Workers and pollers use Redis, not the API, and
// get no key.
func TestHelmAPIKey(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
	}{
		{"defaults", nil},
		{"an Ingress and no key", []string{"--set", "api.ingress.enabled=true"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := render(t, c.args...)
			key := r.secrets["sundial"].StringData["api-keys"]
			if len(key) < 32 || strings.Trim(key, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != "" {
				t.Fatalf("the chart's Secret holds api-keys %q, want a generated key of 32 or more letters and digits", key)
			}
			e := envOf(r.deployments["api"], "SUNDIAL_API_KEYS")
			if e == nil || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
				e.ValueFrom.SecretKeyRef.Name != "sundial" || e.ValueFrom.SecretKeyRef.Key != "api-keys" {
				t.Fatalf("the api Deployment's SUNDIAL_API_KEYS is %+v, want the chart Secret's api-keys", e)
			}
			cfg := loadConfig(t, "api", map[string]string{"SUNDIAL_API_KEYS": key})
			if cfg == nil || len(cfg.APIKeys) != 1 || cfg.APIKeys[0] != key {
				t.Errorf("the API would run with keys %v, want the generated one", cfg.APIKeys)
			}
			for _, comp := range []string{"worker", "poller"} {
				if envOf(r.deployments[comp], "SUNDIAL_API_KEYS") != nil {
					t.Errorf("the %s gets SUNDIAL_API_KEYS; it does not call the API", comp)
				}
			}
			// A new key per install: helm template, like a first install,
			// finds no Secret to keep one from.
			if again := render(t, c.args...).secrets["sundial"].StringData["api-keys"]; again == key {
				t.Errorf("two renders generated the same key %q: it is not random", key)
			}
		})
	}
	t.Run("allowOpen", func(t *testing.T) {
		for _, args := range [][]string{
			{"--set", "apiKeys.allowOpen=true"},
			{"--set", "apiKeys.allowOpen=true", "--set", "api.ingress.enabled=true"},
		} {
			r := render(t, args...)
			for name, s := range r.secrets {
				if _, ok := s.StringData["api-keys"]; ok {
					t.Errorf("%v: Secret %s holds api-keys; an open API has none", args, name)
				}
			}
			for comp, d := range r.deployments {
				if envOf(d, "SUNDIAL_API_KEYS") != nil {
					t.Errorf("%v: the %s gets SUNDIAL_API_KEYS; want an open API", args, comp)
				}
			}
		}
	})
}

// TestHelmWebhookPolicy: SUNDIAL_HTTP_JOB_ALLOW set in the worker's config
// reaches the worker and parses.
func TestHelmWebhookPolicy(t *testing.T) {
	r := render(t, chartCases[4].args()...)
	e := envOf(r.deployments["worker"], "SUNDIAL_HTTP_JOB_ALLOW")
	if e == nil {
		t.Fatalf("%s sets worker.config.SUNDIAL_HTTP_JOB_ALLOW; the worker does not get it", chartCases[4].values)
	}
	cfg := loadConfig(t, "worker", map[string]string{e.Name: e.Value})
	if want := "hooks.internal.example.com:8443,*.svc.cluster.local,10.20.0.0/16"; cfg == nil || cfg.HTTPJobAllow.String() != want {
		t.Errorf("the worker's webhook policy is %v, want %s", cfg, want)
	}
	if envOf(render(t).deployments["worker"], "SUNDIAL_HTTP_JOB_ALLOW") != nil {
		t.Error("the defaults set SUNDIAL_HTTP_JOB_ALLOW; the default policy needs none")
	}
}

// managedVars are the variables the chart sets from its own values; every
// other variable of pkg/config goes through config (values.schema.json
// lists exactly those, so a typo fails at install).
var managedVars = []string{
	"SUNDIAL_REDIS_URL", "SUNDIAL_MONGO_URI", "SUNDIAL_MONGO_DB", "SUNDIAL_HISTORY", "SUNDIAL_HTTP_ADDR",
	"SUNDIAL_METRICS_ADDR", "SUNDIAL_API_KEYS", "SUNDIAL_SHUTDOWN_TIMEOUT", "SUNDIAL_WORKER_ID",
	"SUNDIAL_OIDC_ISSUER", "SUNDIAL_OIDC_CLIENT_ID", "SUNDIAL_OIDC_REDIRECT_URL", "SUNDIAL_OIDC_ROLES_CLAIM",
	"SUNDIAL_OIDC_ROLES", "SUNDIAL_OIDC_CLIENT_SECRET", "SUNDIAL_SESSION_SECRET",
	"SUNDIAL_KEYRING", "SUNDIAL_KEYRING_PRIMARY",
}

func TestHelmSchemaKnowsEveryVariable(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chart, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Definitions struct {
			Config struct {
				Properties map[string]any `json:"properties"`
			} `json:"config"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	got := keys(schema.Definitions.Config.Properties)
	var want []string
	for _, v := range config.Vars {
		if !slices.Contains(managedVars, v.Name) {
			want = append(want, v.Name)
		}
	}
	slices.Sort(want)
	for _, name := range want {
		if !slices.Contains(got, name) {
			t.Errorf("pkg/config has %s: add it to definitions.config.properties in deploy/helm/sundial/values.schema.json (or to managedVars if the chart sets it)", name)
		}
	}
	for _, name := range got {
		if !slices.Contains(want, name) {
			t.Errorf("values.schema.json allows %s, which pkg/config does not read or the chart sets itself", name)
		}
	}
	// Every managed variable is one the binaries read, and the chart sets it.
	r := render(t, chartCases[4].args()...)
	set := map[string]bool{}
	for _, d := range r.deployments {
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			set[e.Name] = true
		}
	}
	known := configVars()
	for _, name := range managedVars {
		if !known[name] || !set[name] {
			t.Errorf("%s: in pkg/config %v, set by the chart %v", name, known[name], set[name])
		}
	}
}
