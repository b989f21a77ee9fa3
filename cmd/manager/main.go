// Command manager runs the AgentRun controller: it reconciles each AgentRun
// into one Job, harvests the agent's end into the AgentRun's status, and
// serves metrics (runs by end status, tokens and cost by runtime and model)
// through controller-runtime's metrics server.
package main

import (
	"flag"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
	"github.com/agentrun-dev/agentrun/controllers"
)

func main() {
	var (
		metricsAddr, probeAddr, runnerImage, pullPolicy string
		leaderElect                                     bool
		concurrency                                     int
		qps                                             float64
		burst                                           int
		graces                                          = controllers.DefaultGraces
	)
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of the metrics endpoint (0 disables it)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of the health and readiness probes")
	flag.BoolVar(&leaderElect, "leader-elect", false, "elect a leader, for more than one replica")
	flag.StringVar(&runnerImage, "runner-image", "agentrun-runner:dev", "default image of the agent Pods (agentrun, bubblewrap, the agent CLIs)")
	flag.StringVar(&pullPolicy, "runner-image-pull-policy", string(corev1.PullIfNotPresent), "pull policy of the runner image")
	flag.IntVar(&concurrency, "max-concurrent-reconciles", 8, "AgentRuns reconciled at once")
	flag.Float64Var(&qps, "kube-api-qps", 50, "requests per second to the API server")
	flag.IntVar(&burst, "kube-api-burst", 100, "request burst to the API server")
	flag.DurationVar(&graces.Startup, "startup-grace", graces.Startup, "how long an image pull or container configuration error may last before the run fails")
	flag.DurationVar(&graces.Unschedulable, "unschedulable-grace", graces.Unschedulable, "how long a Pod may stay unschedulable before the run fails")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(metricsAddr, probeAddr, leaderElect, concurrency, qps, burst, graces,
		controllers.JobConfig{RunnerImage: runnerImage, PullPolicy: corev1.PullPolicy(pullPolicy)}); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}

func run(metricsAddr, probeAddr string, leaderElect bool, concurrency int, qps float64, burst int,
	graces controllers.Graces, jobCfg controllers.JobConfig) error {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))

	cfg := ctrl.GetConfigOrDie()
	cfg.QPS, cfg.Burst = float32(qps), burst
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: metricsAddr},
		HealthProbeBindAddress: probeAddr,
		LeaderElection:         leaderElect,
		LeaderElectionID:       "agentrun-manager.agentrun.dev",
		// The process exits as soon as the manager stops, so giving the
		// lease back is safe, and a rollout's new Pod leads at once
		// instead of after the lease expires.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         controllers.CacheOptions(),
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	r := &controllers.AgentRunReconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Recorder:                mgr.GetEventRecorderFor("agentrun-controller"),
		Clock:                   clock.RealClock{},
		Logs:                    controllers.ClientLogReader{Client: clientset},
		Job:                     jobCfg,
		Graces:                  graces,
		MaxConcurrentReconciles: concurrency,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.WithName("manager").Info("starting", "runnerImage", jobCfg.RunnerImage)
	return mgr.Start(ctrl.SetupSignalHandler())
}
