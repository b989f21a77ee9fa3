package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/controllers"
	"github.com/agentrun-dev/agentrun/internal/testenv"
)

func TestSplitList(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"team-a", []string{"team-a"}},
		{"team-a, team-b,,", []string{"team-a", "team-b"}},
	} {
		if got := splitList(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("splitList(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestSandboxProfileFlags: the profile flags in the kubelet's syntax; a
// Localhost path stays under the kubelet's seccomp root.
func TestSandboxProfileFlags(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    *corev1.SeccompProfile
		wantErr bool
	}{
		{"runtime-default", nil, false},
		{"", nil, false},
		{"unconfined", &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}, false},
		{"localhost/agentrun/bwrap.json", &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To("agentrun/bwrap.json")}, false},
		{"localhost/", nil, true},
		{"localhost//etc/bwrap.json", nil, true},
		{"localhost/../bwrap.json", nil, true},
		{"Localhost", nil, true},
	} {
		got, err := parseSeccompProfile(tc.in)
		if (err != nil) != tc.wantErr || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseSeccompProfile(%q) = %+v, %v; want %+v (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	for _, tc := range []struct {
		in      string
		want    *corev1.AppArmorProfile
		wantErr bool
	}{
		{"", nil, false},
		{"runtime-default", &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}, false},
		{"unconfined", &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}, false},
		{"localhost/agentrun-bwrap", &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: ptr.To("agentrun-bwrap")}, false},
		{"localhost/", nil, true},
		{"agentrun-bwrap", nil, true},
	} {
		got, err := parseAppArmorProfile(tc.in)
		if (err != nil) != tc.wantErr || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseAppArmorProfile(%q) = %+v, %v; want %+v (error %v)", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
}

// TestManagerOptions: the command line's effect on controller-runtime's
// options: the authorization filter and HTTP/1.1 only on the secure
// metrics endpoint, a certificate directory that must hold its files, and
// a cache limited to the watched namespaces.
func TestManagerOptions(t *testing.T) {
	certs := t.TempDir()
	for _, f := range []string{"tls.crt", "tls.key"} {
		if err := os.WriteFile(filepath.Join(certs, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		config  config
		wantErr string
		check   func(t *testing.T, c config)
	}{
		{"secure", config{metricsAddr: ":8443", metricsSecure: true}, "", func(t *testing.T, c config) {
			o := mustOptions(t, c)
			if !o.Metrics.SecureServing || o.Metrics.FilterProvider == nil {
				t.Errorf("metrics secure %v, filter %v: want HTTPS behind the authorization filter", o.Metrics.SecureServing, o.Metrics.FilterProvider != nil)
			}
			cfg := &tls.Config{NextProtos: []string{"h2"}}
			for _, f := range o.Metrics.TLSOpts {
				f(cfg)
			}
			if !slices.Equal(cfg.NextProtos, []string{"http/1.1"}) {
				t.Errorf("ALPN %v: HTTP/2 must be off unless asked for", cfg.NextProtos)
			}
			if o.Metrics.CertDir != "" || o.Cache.DefaultNamespaces != nil {
				t.Errorf("cert dir %q, namespaces %v", o.Metrics.CertDir, o.Cache.DefaultNamespaces)
			}
		}},
		{"HTTP/2 on", config{metricsSecure: true, enableHTTP2: true}, "", func(t *testing.T, c config) {
			if o := mustOptions(t, c); len(o.Metrics.TLSOpts) != 0 {
				t.Errorf("TLS options %d", len(o.Metrics.TLSOpts))
			}
		}},
		{"plain", config{metricsAddr: ":8080"}, "", func(t *testing.T, c config) {
			if o := mustOptions(t, c); o.Metrics.SecureServing || o.Metrics.FilterProvider != nil {
				t.Error("plain metrics got TLS or the filter")
			}
		}},
		{"certificate", config{metricsSecure: true, metricsCertPath: certs}, "", func(t *testing.T, c config) {
			o := mustOptions(t, c)
			if o.Metrics.CertDir != certs || o.Metrics.CertName != "tls.crt" || o.Metrics.KeyName != "tls.key" {
				t.Errorf("cert %s %s %s", o.Metrics.CertDir, o.Metrics.CertName, o.Metrics.KeyName)
			}
		}},
		{"missing certificate", config{metricsSecure: true, metricsCertPath: t.TempDir()}, "--metrics-cert-path", nil},
		{"certificate without HTTPS", config{metricsCertPath: certs}, "--metrics-cert-path needs --metrics-secure", nil},
		{"watched namespaces", config{watchNamespaces: []string{"team-a", "team-b"}}, "", func(t *testing.T, c config) {
			o := mustOptions(t, c)
			var got []string
			for ns := range o.Cache.DefaultNamespaces {
				got = append(got, ns)
			}
			slices.Sort(got)
			if !slices.Equal(got, []string{"team-a", "team-b"}) {
				t.Errorf("cache namespaces %v", got)
			}
			if len(o.Cache.ByObject) != 3 {
				t.Errorf("the cache lost its selectors for Jobs, Pods and the Pod refusals' Events: %v", o.Cache.ByObject)
			}
		}},
		{"leader election lease", config{leaderElect: true, leaderElectionID: "team-a-manager.agentrun.dev"}, "", func(t *testing.T, c config) {
			if o := mustOptions(t, c); !o.LeaderElection || o.LeaderElectionID != "team-a-manager.agentrun.dev" {
				t.Errorf("leader election %v on %q", o.LeaderElection, o.LeaderElectionID)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := managerOptions(tc.config, newScheme())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			tc.check(t, tc.config)
		})
	}
}

func mustOptions(t *testing.T, c config) ctrl.Options {
	t.Helper()
	o, err := managerOptions(c, newScheme())
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// rulesOf reads the rules of a Role or ClusterRole manifest in config/rbac.
func rulesOf(t *testing.T, file string) []rbacv1.PolicyRule {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "rbac", file))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(b, &role); err != nil {
		t.Fatal(err)
	}
	return role.Rules
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestNamespacedManagerWithLeastPrivilege runs the manager as main builds
// it, against a real API server, as a user holding nothing but the
// generated rules in a Role in one watched namespace and the metrics
// filter's ClusterRole: it runs that namespace's AgentRuns and leaves
// another namespace's alone; its metrics answer only callers allowed get
// on /metrics (config/rbac/metrics_reader_role.yaml), over HTTP/1.1.
func TestNamespacedManagerWithLeastPrivilege(t *testing.T) {
	env := testenv.StartT(t, testenv.Options{})
	admin := env.Config
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	k, err := client.New(admin, client.Options{Scheme: newScheme()})
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{"watched", "other"} {
		must(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}

	// The manager's identity and exactly the chart's grants for
	// watchNamespaces=[watched] (charts/ checks the chart renders these
	// rules).
	user, err := env.AddUser(envtest.User{Name: "system:serviceaccount:agentrun-system:agentrun-manager"}, nil)
	must(err)
	subject := []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "system:serviceaccount:agentrun-system:agentrun-manager"}}
	must(k.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "watched", Name: "agentrun-manager"}, Rules: rulesOf(t, "role.yaml")}))
	must(k.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "watched", Name: "agentrun-manager"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "agentrun-manager"}, Subjects: subject}))
	must(k.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "agentrun-metrics-auth"}, Rules: rulesOf(t, "metrics_auth_role.yaml")}))
	must(k.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "agentrun-metrics-auth"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "agentrun-metrics-auth"}, Subjects: subject}))
	must(k.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "agentrun-metrics-reader"}, Rules: rulesOf(t, "metrics_reader_role.yaml")}))

	port := freePort(t)
	mgr, err := newManager(user.Config(), config{
		metricsAddr: fmt.Sprintf("127.0.0.1:%d", port), metricsSecure: true, probeAddr: "0",
		watchNamespaces: []string{"watched"}, concurrency: 2, graces: controllers.DefaultGraces,
		job: controllers.JobConfig{RunnerImage: "agentrun-runner:test", PullPolicy: corev1.PullNever},
	})
	must(err)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	newRun := func(ns string) {
		t.Helper()
		must(k.Create(ctx, &v1alpha1.AgentRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"},
			Spec: v1alpha1.AgentRunSpec{Runtime: v1alpha1.RuntimeClaudeCode, Prompt: v1alpha1.PromptSource{Text: ptr.To("Say hello")}}}))
	}
	newRun("other")
	newRun("watched")
	job := &batchv1.Job{}
	eventually(t, "the watched namespace's AgentRun gets its Job", func() string {
		if err := k.Get(ctx, client.ObjectKey{Namespace: "watched", Name: "hello"}, job); err != nil {
			return err.Error()
		}
		return ""
	})
	run := &v1alpha1.AgentRun{}
	eventually(t, "the manager writes its status", func() string {
		must(k.Get(ctx, client.ObjectKey{Namespace: "watched", Name: "hello"}, run))
		if run.Status.Phase == "" {
			return "no phase"
		}
		return ""
	})
	// The records controller reads its namespaces' annotations: the Role
	// grants get on the watched Namespace object, and on no other.
	asManager, err := client.New(user.Config(), client.Options{Scheme: newScheme()})
	must(err)
	if err := asManager.Get(ctx, client.ObjectKey{Name: "watched"}, &corev1.Namespace{}); err != nil {
		t.Errorf("the manager cannot get its watched Namespace: %v", err)
	}
	if err := asManager.Get(ctx, client.ObjectKey{Name: "other"}, &corev1.Namespace{}); !apierrors.IsForbidden(err) {
		t.Errorf("the manager's get of another Namespace: %v, want forbidden", err)
	}
	err = k.Get(ctx, client.ObjectKey{Namespace: "other", Name: "hello"}, &batchv1.Job{})
	must(k.Get(ctx, client.ObjectKey{Namespace: "other", Name: "hello"}, run))
	if !apierrors.IsNotFound(err) || run.Status.Phase != "" {
		t.Errorf("the unwatched namespace's AgentRun: Job %v, phase %q; want neither", err, run.Status.Phase)
	}

	// The metrics, as a scraper sees them.
	cs, err := kubernetes.NewForConfig(admin)
	must(err)
	token := func(sa string) string {
		t.Helper()
		_, err := cs.CoreV1().ServiceAccounts("watched").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		must(err)
		tr, err := cs.CoreV1().ServiceAccounts("watched").CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		must(err)
		return tr.Status.Token
	}
	scraper, stranger := token("scraper"), token("stranger")
	must(k.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scraper"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "agentrun-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: "watched"}}}))
	// The certificate is self-signed; HTTP/2 is offered and must be
	// declined.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}}
	get := func(token string) (int, string, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
		must(err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error(), ""
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), resp.Proto
	}
	eventually(t, "the metrics endpoint answers", func() string {
		if code, body, _ := get(""); code != http.StatusUnauthorized {
			return fmt.Sprintf("without a token: %d %.200s", code, body)
		}
		return ""
	})
	if code, body, _ := get(stranger); code != http.StatusForbidden {
		t.Errorf("a token without the metrics-reader role: %d %.200s, want 403", code, body)
	}
	code, body, proto := get(scraper)
	if code != http.StatusOK || !strings.Contains(body, `controller_runtime_reconcile_total{controller="agentrun"`) {
		t.Errorf("the scraper's token: %d %.300s", code, body)
	}
	if proto != "HTTP/1.1" {
		t.Errorf("protocol %s, want HTTP/1.1", proto)
	}
}

func eventually(t *testing.T, what string, cond func() string) {
	t.Helper()
	var last string
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if last = cond(); last == "" {
			return
		}
	}
	t.Fatalf("%s: still not after 30s: %s", what, last)
}

// TestSetStreamingList: the flag decides client-go's WatchListClient for
// every informer the manager starts, either way.
func TestSetStreamingList(t *testing.T) {
	before := clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient)
	t.Cleanup(func() {
		if err := setStreamingList(before); err != nil {
			t.Error(err)
		}
	})
	for _, on := range []bool{false, true, false} {
		if err := setStreamingList(on); err != nil {
			t.Fatal(err)
		}
		if got := clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient); got != on {
			t.Errorf("after setStreamingList(%v), WatchListClient is %v", on, got)
		}
	}
}
