package kubectlplugin

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// Names the controller gives the run's Pod (controllers/job.go; the tests
// check they agree, without the plugin importing the controller).
const (
	eventsContainer = "events"
	labelUID        = "agentrun.dev/uid"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
}

// kubeFlags are kubectl's connection flags: --kubeconfig, then client-go's
// overrides (--context, --cluster, --user, -n/--namespace, --server,
// --token, --as, --request-timeout, ...), loaded by clientcmd as kubectl
// loads them (KUBECONFIG, ~/.kube/config, in-cluster). clientcmd rather
// than k8s.io/cli-runtime's ConfigFlags: those wrap the same clientcmd
// code but would bring cli-runtime and kustomize into the module for four
// verbs.
type kubeFlags struct {
	rules     *clientcmd.ClientConfigLoadingRules
	overrides clientcmd.ConfigOverrides
	fs        *pflag.FlagSet // the connection flags alone, for help
}

func newKubeFlags() *kubeFlags {
	return &kubeFlags{rules: clientcmd.NewDefaultClientConfigLoadingRules()}
}

func (k *kubeFlags) bind(fs *pflag.FlagSet) {
	k.fs = pflag.NewFlagSet("connection", pflag.ContinueOnError)
	k.fs.StringVar(&k.rules.ExplicitPath, "kubeconfig", "", "Path to the kubeconfig file to use for CLI requests.")
	clientcmd.BindOverrideFlags(&k.overrides, k.fs, clientcmd.RecommendedConfigOverrideFlags(""))
	fs.AddFlagSet(k.fs)
}

// isConnection reports whether a flag is one of the connection flags.
func (k *kubeFlags) isConnection(name string) bool { return k.fs != nil && k.fs.Lookup(name) != nil }

// kube is a verb's connection: the client, the namespace of the request
// (-n, else the context's, else default) and the log source.
type kube struct {
	cfg  *rest.Config
	c    client.Client
	ns   string
	logs LogSource
}

// connect loads the kubeconfig and makes the clients.
func (k *kubeFlags) connect(e *Env) (*kube, error) {
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(k.rules, &k.overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, noCluster(err)
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return nil, noCluster(err)
	}
	// The API server's warnings (deprecations, say) reach the user as
	// kubectl shows them, not controller-runtime's log.
	cfg.WarningHandler = rest.NewWarningWriter(e.Stderr, rest.WarningWriterOptions{Deduplicate: true})
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	logs, err := e.NewLogSource(cfg)
	if err != nil {
		return nil, err
	}
	return &kube{cfg: cfg, c: c, ns: ns, logs: logs}, nil
}

// noClusterError: the kubeconfig does not give a cluster to talk to.
type noClusterError struct{ msg string }

func (e noClusterError) Error() string { return e.msg }

// noCluster words an error of loading the kubeconfig as what to do
// (client-go's own empty-config message suggests KUBERNETES_MASTER, a
// variable kubectl no longer reads).
func noCluster(err error) error {
	if clientcmd.IsEmptyConfig(err) {
		where := "KUBECONFIG is unset and ~/.kube/config does not exist"
		if v := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); v != "" {
			where = fmt.Sprintf("KUBECONFIG=%s names no readable kubeconfig", v)
		}
		return noClusterError{"no cluster to talk to: no kubeconfig was found (" + where + ", and this is not a Pod). " +
			"Pass --kubeconfig FILE or set KUBECONFIG to the file kubectl uses, or give --server URL with --token or the certificate flags"}
	}
	return noClusterError{fmt.Sprintf("cannot load the kubeconfig: %v. Fix the file, or pass another one with --kubeconfig FILE or KUBECONFIG", strings.TrimSpace(err.Error()))}
}

// LogSource opens a container's log. The real one reads pods/log through
// the API server; tests give their own, since envtest has no kubelet.
type LogSource interface {
	// Open streams the log of a container from its start; with follow the
	// stream stays open until the container ends.
	Open(ctx context.Context, namespace, pod, container string, follow bool) (io.ReadCloser, error)
}

type apiLogs struct{ cs kubernetes.Interface }

// Open implements LogSource with `get` on pods/log.
func (a apiLogs) Open(ctx context.Context, namespace, pod, container string, follow bool) (io.ReadCloser, error) {
	rc, err := a.cs.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, Follow: follow}).Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the log of %s/%s -c %s: %w", namespace, pod, container, err)
	}
	return rc, nil
}
