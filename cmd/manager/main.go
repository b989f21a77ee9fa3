// Command manager runs the AgentRun controller: it reconciles each AgentRun
// into one Job, copies a running agent's live progress and its end into
// the AgentRun's status, keeps the AgentBudgets' accounts (holding and
// stopping the runs of a spent budget), and serves metrics (tokens and cost
// by namespace, runtime and model, runs by phase and end, budgets) through
// controller-runtime's metrics server, over HTTPS to callers the API server
// authenticates and authorizes.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/controllers"
	"github.com/agentrun-dev/agentrun/harvest"
)

// config is the manager's command line.
type config struct {
	metricsAddr, probeAddr string
	// metricsSecure serves metrics over HTTPS behind controller-runtime's
	// authentication and authorization filter (a TokenReview and a
	// SubjectAccessReview per caller, cached), as kubebuilder's scaffold
	// does: only callers allowed `get` on the non-resource URL /metrics
	// read them.
	metricsSecure bool
	// metricsCertPath holds tls.crt and tls.key (cert-manager, say);
	// empty: a self-signed certificate made at start.
	metricsCertPath string
	// enableHTTP2 is off by default: HTTP/2's stream reset and
	// CONTINUATION floods (CVE-2023-44487, CVE-2023-39325) reach a
	// server before any authentication.
	enableHTTP2 bool
	// watchNamespaces limits the manager to these namespaces (its cache,
	// and so its list and watch calls), so that Roles in each suffice;
	// empty: all namespaces.
	watchNamespaces []string
	leaderElect     bool
	// leaderElectionID names the lease: one per install, so that two
	// releases (disjoint watchNamespaces) each elect their own leader.
	leaderElectionID string
	concurrency      int
	qps              float64
	burst            int
	// streamingList is client-go's WatchListClient for the cache's first
	// lists (setStreamingList).
	streamingList bool
	graces        controllers.Graces
	job           controllers.JobConfig
	// live reads running runs' progress from their Pods
	// (docs/kubernetes/live-usage.md); off: usage reaches status at the end
	// only.
	live           bool
	liveIntervals  controllers.LiveIntervals
	liveMaxConns   int
	prices         controllers.Prices
	budgetInterval time.Duration
}

func main() {
	c := config{graces: controllers.DefaultGraces, liveIntervals: controllers.DefaultLiveIntervals}
	var pullPolicy, watch, seccomp, apparmor, prices, requests, limits string
	flag.StringVar(&c.metricsAddr, "metrics-bind-address", ":8443", "address of the metrics endpoint (0 disables it)")
	flag.BoolVar(&c.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to callers the API server authenticates and authorizes (get on /metrics); false serves plain HTTP to anyone")
	flag.StringVar(&c.metricsCertPath, "metrics-cert-path", "", "directory with the metrics server's tls.crt and tls.key (reloaded when they change); empty: a self-signed certificate")
	flag.BoolVar(&c.enableHTTP2, "enable-http2", false, "serve metrics over HTTP/2 too (off: HTTP/2 stream floods reach the server before authentication)")
	flag.StringVar(&c.probeAddr, "health-probe-bind-address", ":8081", "address of the health and readiness probes")
	flag.BoolVar(&c.leaderElect, "leader-elect", false, "elect a leader, for more than one replica")
	flag.StringVar(&c.leaderElectionID, "leader-election-id", "agentrun-manager.agentrun.dev", "name of the leader election lease in the manager's namespace (the chart's default: <release>-manager.agentrun.dev), one per install")
	flag.StringVar(&watch, "watch-namespaces", "", "comma-separated namespaces to reconcile AgentRuns in (Roles there suffice); empty: all namespaces")
	flag.StringVar(&c.job.RunnerImage, "runner-image", "agentrun-runner:dev", "default image of the agent Pods (agentrun, bubblewrap, the agent CLIs)")
	flag.StringVar(&pullPolicy, "runner-image-pull-policy", string(corev1.PullIfNotPresent), "pull policy of the runner image")
	flag.StringVar(&seccomp, "sandbox-seccomp-profile", "runtime-default", "seccomp profile of sandboxed agent containers: localhost/<path under the kubelet's seccomp root> (the chart installs localhost/agentrun/bwrap.json), runtime-default (the sandbox cannot start: runs fail as SandboxUnavailable) or unconfined (an admin's opt-in)")
	flag.StringVar(&apparmor, "sandbox-apparmor-profile", "", "AppArmor profile of sandboxed agent containers on AppArmor nodes: localhost/<profile> (the chart's is localhost/agentrun-bwrap), runtime-default, unconfined (an admin's opt-in) or empty (the runtime's default)")
	flag.IntVar(&c.concurrency, "max-concurrent-reconciles", 16, "AgentRuns reconciled at once")
	flag.Float64Var(&c.qps, "kube-api-qps", 500, "requests per second to the API server (a run costs about two to start, its Job and its status; live usage writes about one status per model call)")
	flag.IntVar(&c.burst, "kube-api-burst", 1000, "request burst to the API server")
	flag.BoolVar(&c.streamingList, "kube-api-streaming-list", false, "fill the manager's cache at start by streaming lists (client-go's WatchListClient; it decides over KUBE_FEATURE_WatchListClient): spares the API server one large list response per watched type at each start, and waits for its consistent snapshot (about 100 ms or more per start)")
	flag.DurationVar(&c.graces.Startup, "startup-grace", c.graces.Startup, "how long an image pull or container configuration error, or a Job that cannot create its Pod, may last before the run fails")
	flag.DurationVar(&c.graces.Unschedulable, "unschedulable-grace", c.graces.Unschedulable, "how long a Pod may stay unschedulable before the run fails")
	flag.DurationVar(&c.graces.SandboxProfile, "sandbox-profile-grace", c.graces.SandboxProfile, "how long the agent container may fail to start for its seccomp or AppArmor profile before the run fails as SandboxUnavailable")
	flag.BoolVar(&c.live, "live-progress", true, "read running runs' live usage and progress from their Pods' events sidecars into status")
	flag.DurationVar(&c.liveIntervals.Usage, "live-usage-interval", c.liveIntervals.Usage, "least time between two status writes of one run's live usage")
	flag.DurationVar(&c.liveIntervals.Progress, "live-progress-interval", c.liveIntervals.Progress, "least time between two status writes of one run's progress alone (activity, tool calls)")
	flag.Func("live-port", "the port the agent Pods' events sidecars serve the live progress on (default 8788)", func(v string) error {
		p, err := strconv.ParseInt(v, 10, 32)
		if err != nil || p < 1 || p > 65535 {
			return fmt.Errorf("not a port: %q", v)
		}
		c.job.ProgressPort = int32(p)
		return nil
	})
	flag.IntVar(&c.liveMaxConns, "live-max-connections", controllers.DefaultLiveConnections, "live progress polls in flight at once (one per running run)")
	flag.StringVar(&prices, "prices", "", `price table for usage whose runtime reports no cost, JSON: {"MODEL": {"input": USD, "output": USD, "cacheRead": USD, "cacheWrite": USD}} per million tokens; a MODEL ending in * is a prefix`)
	flag.StringVar(&requests, "agent-requests", "", "default resource requests of the agent container, as cpu=500m,memory=1Gi (so a queue such as Kueue counts runs)")
	flag.StringVar(&limits, "agent-limits", "", "default resource limits of the agent container, as memory=4Gi")
	var otlp controllers.Telemetry
	flag.StringVar(&otlp.Endpoint, "otlp-endpoint", "", "export every run as an OpenTelemetry trace and metrics to this OTLP collector URL (the runners' OTEL_EXPORTER_OTLP_ENDPOINT; docs/telemetry.md); empty: no export")
	flag.StringVar(&otlp.Protocol, "otlp-protocol", "http/protobuf", "the OTLP protocol of --otlp-endpoint: grpc or http/protobuf")
	flag.StringVar(&otlp.ServiceName, "otlp-service-name", "agentrun", "service.name of the runs' traces and metrics")
	flag.StringVar(&otlp.ResourceAttributes, "otlp-resource-attributes", "", "more resource attributes of the runs, key=value,... (OTEL_RESOURCE_ATTRIBUTES)")
	flag.StringVar(&otlp.SemconvOptIn, "otlp-semconv-opt-in", "", "OTEL_SEMCONV_STABILITY_OPT_IN of the runs and of the manager's own gen_ai metrics (gen_ai_latest_experimental: the latest GenAI conventions)")
	flag.BoolVar(&otlp.CaptureContent, "otlp-capture-content", false, "export the runs' prompts, texts and results (each cut at 4 KiB)")
	release := flag.Bool("release-harvest-finalizers", false, "do not run the manager: remove the agentrun.dev/harvest finalizer from the agent Pods of --watch-namespaces (all namespaces when empty) and exit, so that no Pod waits for a manager that is gone (the chart's pre-delete hook; docs/kubernetes/operations.md)")
	flag.DurationVar(&c.budgetInterval, "budget-status-interval", controllers.DefaultBudgetInterval, "least time between two writes of an AgentBudget's status that only move its numbers")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	c.job.PullPolicy = corev1.PullPolicy(pullPolicy)
	if otlp.Endpoint != "" {
		// The headers (a back end's API key) come from the environment,
		// which the chart fills from a Secret, never from a flag.
		otlp.Headers = os.Getenv("AGENTRUN_OTLP_HEADERS")
		if err := otlp.Validate(); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
			os.Exit(2)
		}
		c.job.Telemetry = &otlp
	}
	controllers.SetMetricsSemconv(otlp.SemconvOptIn)
	c.watchNamespaces = splitList(watch)
	var err error
	if c.job.SandboxSeccomp, err = parseSeccompProfile(seccomp); err != nil {
		fmt.Fprintln(os.Stderr, "manager: --sandbox-seccomp-profile:", err)
		os.Exit(2)
	}
	if c.job.SandboxAppArmor, err = parseAppArmorProfile(apparmor); err != nil {
		fmt.Fprintln(os.Stderr, "manager: --sandbox-apparmor-profile:", err)
		os.Exit(2)
	}
	if c.prices, err = controllers.ParsePrices(prices); err == nil {
		c.job.AgentResources, err = parseResources(requests, limits)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(2)
	}
	if *release {
		if err := releaseHarvest(ctrl.SetupSignalHandler(), ctrl.GetConfigOrDie(), c.watchNamespaces); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}

// parseSeccompProfile reads --sandbox-seccomp-profile, in the kubelet's
// old annotation syntax that admins know. RuntimeDefault is nil: the
// agent container's default.
func parseSeccompProfile(s string) (*corev1.SeccompProfile, error) {
	switch {
	case s == "" || s == "runtime-default":
		return nil, nil
	case s == "unconfined":
		return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}, nil
	case strings.HasPrefix(s, "localhost/"):
		path := strings.TrimPrefix(s, "localhost/")
		if path == "" || strings.HasPrefix(path, "/") || slices.Contains(strings.Split(path, "/"), "..") {
			return nil, fmt.Errorf("%q: the path is relative to the kubelet's seccomp root, without \"..\" (for example localhost/agentrun/bwrap.json)", s)
		}
		return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: &path}, nil
	}
	return nil, fmt.Errorf("%q: want localhost/<path>, runtime-default or unconfined", s)
}

// parseAppArmorProfile reads --sandbox-apparmor-profile; empty leaves the
// container runtime's default (nil).
func parseAppArmorProfile(s string) (*corev1.AppArmorProfile, error) {
	switch {
	case s == "":
		return nil, nil
	case s == "runtime-default":
		return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeRuntimeDefault}, nil
	case s == "unconfined":
		return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}, nil
	case strings.HasPrefix(s, "localhost/") && len(s) > len("localhost/"):
		name := strings.TrimPrefix(s, "localhost/")
		return &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}, nil
	}
	return nil, fmt.Errorf("%q: want localhost/<profile>, runtime-default, unconfined or empty", s)
}

// describeProfile is a profile as the start-up log shows it.
func describeProfile[P *corev1.SeccompProfile | *corev1.AppArmorProfile](p P) string {
	switch p := any(p).(type) {
	case *corev1.SeccompProfile:
		if p == nil {
			return "RuntimeDefault"
		}
		return strings.TrimSpace(string(p.Type) + " " + ptr.Deref(p.LocalhostProfile, ""))
	case *corev1.AppArmorProfile:
		if p == nil {
			return "the runtime's default"
		}
		return strings.TrimSpace(string(p.Type) + " " + ptr.Deref(p.LocalhostProfile, ""))
	}
	return ""
}

// splitList reads a comma-separated flag value; blanks are dropped.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// parseResources reads --agent-requests and --agent-limits: NAME=QUANTITY,
// comma-separated.
func parseResources(requests, limits string) (corev1.ResourceRequirements, error) {
	var out corev1.ResourceRequirements
	for _, f := range []struct {
		flag, value string
		into        *corev1.ResourceList
	}{{"--agent-requests", requests, &out.Requests}, {"--agent-limits", limits, &out.Limits}} {
		for _, item := range splitList(f.value) {
			name, q, ok := strings.Cut(item, "=")
			if !ok {
				return out, fmt.Errorf("%s: %q is not NAME=QUANTITY (cpu=500m,memory=1Gi)", f.flag, item)
			}
			quantity, err := resource.ParseQuantity(strings.TrimSpace(q))
			if err != nil {
				return out, fmt.Errorf("%s: %s: %v", f.flag, name, err)
			}
			if *f.into == nil {
				*f.into = corev1.ResourceList{}
			}
			(*f.into)[corev1.ResourceName(strings.TrimSpace(name))] = quantity
		}
	}
	return out, nil
}

func newScheme() *runtime.Scheme {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	return scheme
}

// managerOptions are the controller-runtime options of the command line.
func managerOptions(c config, scheme *runtime.Scheme) (ctrl.Options, error) {
	metrics := metricsserver.Options{BindAddress: c.metricsAddr, SecureServing: c.metricsSecure}
	if c.metricsSecure {
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
		if !c.enableHTTP2 {
			metrics.TLSOpts = append(metrics.TLSOpts, func(t *tls.Config) { t.NextProtos = []string{"http/1.1"} })
		}
		if c.metricsCertPath != "" {
			// controller-runtime falls back to a self-signed certificate
			// when the files are missing; a path given on purpose must
			// not be ignored silently.
			for _, f := range []string{"tls.crt", "tls.key"} {
				if _, err := os.Stat(filepath.Join(c.metricsCertPath, f)); err != nil {
					return ctrl.Options{}, fmt.Errorf("--metrics-cert-path: %w", err)
				}
			}
			metrics.CertDir, metrics.CertName, metrics.KeyName = c.metricsCertPath, "tls.crt", "tls.key"
		}
	} else if c.metricsCertPath != "" {
		return ctrl.Options{}, errors.New("--metrics-cert-path needs --metrics-secure")
	}
	cacheOpts := controllers.CacheOptions()
	if len(c.watchNamespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range c.watchNamespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metrics,
		HealthProbeBindAddress: c.probeAddr,
		LeaderElection:         c.leaderElect,
		LeaderElectionID:       c.leaderElectionID,
		// The process exits as soon as the manager stops, so giving the
		// lease back is safe, and a rollout's new Pod leads at once
		// instead of after the lease expires.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cacheOpts,
		NewCache:                      controllers.NewCache,
	}, nil
}

// releaseHarvest removes the harvest finalizer from the agent Pods of the
// namespaces (every namespace when there are none), logging each Pod.
func releaseHarvest(ctx context.Context, cfg *rest.Config, namespaces []string) error {
	c, err := client.New(cfg, client.Options{Scheme: newScheme()})
	if err != nil {
		return err
	}
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	log := ctrl.Log.WithName("release")
	for _, ns := range namespaces {
		released, err := harvest.Release(ctx, c, ns)
		for _, p := range released {
			log.Info("released the agent Pod: it no longer waits for a manager", "pod", p.String())
		}
		if err != nil {
			return err
		}
		log.Info("released the agent Pods", "namespace", ns, "pods", len(released))
	}
	return nil
}

func run(c config) error {
	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(c.qps), c.burst
	mgr, err := newManager(cfg, c)
	if err != nil {
		return err
	}
	ctrl.Log.WithName("manager").Info("starting", "runnerImage", c.job.RunnerImage,
		"watchNamespaces", c.watchNamespaces, "metricsSecure", c.metricsSecure,
		"sandboxSeccomp", describeProfile(c.job.SandboxSeccomp), "sandboxAppArmor", describeProfile(c.job.SandboxAppArmor))
	return mgr.Start(ctrl.SetupSignalHandler())
}

// newManager is the manager with the AgentRun controller and the health
// checks, not yet started; its informers list as c.streamingList says.
func newManager(cfg *rest.Config, c config) (ctrl.Manager, error) {
	if err := setStreamingList(c.streamingList); err != nil {
		return nil, err
	}
	opts, err := managerOptions(c, newScheme())
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	var live *controllers.Live
	if c.live {
		live = controllers.NewLive(c.liveMaxConns, 0)
	}
	r := &controllers.AgentRunReconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Recorder:                mgr.GetEventRecorderFor("agentrun-controller"),
		Clock:                   clock.RealClock{},
		Logs:                    controllers.ClientLogReader{Client: clientset},
		Job:                     c.job,
		Graces:                  c.graces,
		MaxConcurrentReconciles: c.concurrency,
		Live:                    live,
		LiveIntervals:           c.liveIntervals,
		Prices:                  c.prices,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the controller: %w", err)
	}
	budgets := &controllers.BudgetReconciler{Client: mgr.GetClient(), Clock: clock.RealClock{}, Live: live,
		Prices: c.prices, Interval: c.budgetInterval}
	if err := budgets.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the budget controller: %w", err)
	}
	records := &controllers.RecordsReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorderFor("agentrun-records"), Clock: clock.RealClock{}}
	if err := records.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the records controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}

// setStreamingList turns client-go's streaming lists (WatchListClient) on
// or off for every informer the manager starts. Off is the default: with
// it on, the API server answers each of the cache's first lists only once
// its watch cache is known to be as new as etcd, which costs an idle
// cluster about 100 ms or more of every manager start, and so of every
// backlog's first Job (hack/scale-bench.sh). What the manager lists is
// agentrun's own: its resources, and the runs' Jobs, Pods and refusal
// Events, selected by label or field; a fleet whose lists grow large
// enough to weigh on the API server's memory turns it on.
func setStreamingList(on bool) error {
	gates, ok := clientfeatures.FeatureGates().(interface {
		Set(clientfeatures.Feature, bool) error
	})
	if !ok {
		return fmt.Errorf("client-go's feature gates cannot be set: %T", clientfeatures.FeatureGates())
	}
	return gates.Set(clientfeatures.WatchListClient, on)
}
