package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/agentrun-dev/agentrun/api/v1alpha1"
)

// runSpec is what the flags of run say; build makes the AgentRun.
type runSpec struct {
	Runtime     string
	Model       string
	Name        string
	Prompt      string
	Timeout     string
	TTL         string
	MaxTurns    int32
	MaxTokens   int64
	Network     string
	AllowHosts  []string
	AddHosts    []string // NAME=IP
	Env         []string // NAME=VALUE
	Credentials []string // NAME=SECRET/KEY@HOST:PORT[,HOST:PORT...]
	Labels      []string // KEY=VALUE
	NoSubagents bool
}

// build makes the AgentRun of the flags, or says which flag is wrong and
// how to write it. It checks the shapes a flag has to have; the API server
// checks the rest (the CRD's schema and CEL rules) when the run is created.
func (s runSpec) build(namespace string) (*v1alpha1.AgentRun, error) {
	run := &v1alpha1.AgentRun{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "AgentRun"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: s.Name},
		Spec:       v1alpha1.AgentRunSpec{Runtime: v1alpha1.Runtime(s.Runtime), Model: s.Model},
	}
	if s.Runtime == "" {
		return nil, errors.New("--runtime is required: claude-code, codex, pi or dsh")
	}
	if s.Name == "" {
		// Every run gets a fresh name and its own record
		// (docs/kubernetes/gitops.md).
		run.GenerateName = s.Runtime + "-"
	}
	if strings.TrimSpace(s.Prompt) == "" {
		return nil, errors.New("the prompt is empty: give it as the last argument, or in a file with -f FILE (- reads stdin)")
	}
	run.Spec.Prompt.Text = &s.Prompt
	if s.Timeout != "" {
		timeout, err := specDuration(s.Timeout)
		if err != nil {
			return nil, fmt.Errorf("--timeout %q: seconds (300) or a duration (30m, 2h), more than 0", s.Timeout)
		}
		run.Spec.Timeout = timeout
	}
	if s.TTL != "" {
		if d, err := time.ParseDuration(s.TTL); err != nil || d < 0 {
			return nil, fmt.Errorf("--ttl %q: a duration such as 1h or 90s (0s removes the Job and Pod right after the end)", s.TTL)
		}
		run.Spec.Retention = &v1alpha1.Retention{JobTTLAfterEnd: s.TTL}
	}
	if s.MaxTurns > 0 || s.MaxTokens > 0 {
		run.Spec.Limits = &v1alpha1.Limits{}
		if s.MaxTurns > 0 {
			run.Spec.Limits.MaxTurns = &s.MaxTurns
		}
		if s.MaxTokens > 0 {
			run.Spec.Limits.MaxTokens = &s.MaxTokens
		}
	}
	if s.NoSubagents {
		f := false
		run.Spec.Subagents = &f
	}
	network, err := s.network()
	if err != nil {
		return nil, err
	}
	run.Spec.Network = network
	for _, kv := range s.Env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("--env %q: write NAME=VALUE", kv)
		}
		run.Spec.Env = append(run.Spec.Env, corev1.EnvVar{Name: name, Value: value})
	}
	for _, c := range s.Credentials {
		cred, err := parseCredential(c)
		if err != nil {
			return nil, err
		}
		run.Spec.Credentials = append(run.Spec.Credentials, cred)
	}
	for _, kv := range s.Labels {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
			return nil, fmt.Errorf("--label %q: write KEY=VALUE, a valid Kubernetes label", kv)
		}
		if run.Labels == nil {
			run.Labels = map[string]string{}
		}
		run.Labels[k] = v
	}
	return run, nil
}

// specDuration is a length of time as the spec writes it (a Go duration),
// from whole seconds ("300", what `agentrun run --timeout` takes too) or a
// duration ("30m"); more than zero.
func specDuration(v string) (string, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n <= 0 || n > int64(math.MaxInt64/int64(time.Second)) {
			return "", errors.New("not a positive number of seconds")
		}
		return (time.Duration(n) * time.Second).String(), nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return "", errors.New("not a positive duration")
	}
	return v, nil
}

// network is spec.network from the flags, nil when they set none (the
// CRD's default then applies): --allow-host makes the mode Custom, as
// `agentrun run --allow-host` makes it custom. The flags take the
// command line's lower-case spelling.
func (s runSpec) network() (*v1alpha1.Network, error) {
	flag := s.Network
	switch {
	case len(s.AllowHosts) > 0 && flag != "" && flag != v1alpha1.NetworkCustom.Flag():
		return nil, fmt.Errorf("--allow-host makes the network custom; drop --network %s", flag)
	case len(s.AllowHosts) > 0:
		flag = v1alpha1.NetworkCustom.Flag()
	}
	if flag == "" && len(s.AddHosts) == 0 {
		return nil, nil
	}
	n := &v1alpha1.Network{AllowHosts: s.AllowHosts}
	if flag != "" {
		mode, ok := v1alpha1.NetworkModeFromFlag(flag)
		if !ok {
			return nil, fmt.Errorf("--network %q: use none, full or custom (with --allow-host)", flag)
		}
		n.Mode = mode
	}
	for _, h := range s.AddHosts {
		name, ip, ok := strings.Cut(h, "=")
		if !ok || name == "" || net.ParseIP(ip) == nil {
			return nil, fmt.Errorf("--add-host %q: write NAME=IP, as Docker's flag", h)
		}
		n.AddHosts = append(n.AddHosts, v1alpha1.HostAddress{Name: name, IP: ip})
	}
	return n, nil
}

// credentialForm is how a --credential is written.
const credentialForm = "NAME=SECRET/KEY@HOST:PORT[,HOST:PORT...], for example ANTHROPIC_API_KEY=agent-keys/anthropic@api.anthropic.com:443 " +
	"(http://HOST:PORT for a destination that speaks plain HTTP only; the real value then travels unencrypted)"

// parseCredential reads one --credential into spec.credentials: the
// variable NAME, the Secret key that holds the real value, and the hosts
// that receive it.
func parseCredential(s string) (v1alpha1.Credential, error) {
	bad := func(why string) (v1alpha1.Credential, error) {
		return v1alpha1.Credential{}, fmt.Errorf("--credential %q: %s; write %s", s, why, credentialForm)
	}
	name, rest, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return bad("no NAME=")
	}
	ref, hosts, ok := strings.Cut(rest, "@")
	if !ok || hosts == "" {
		return bad("no @HOST:PORT")
	}
	secret, key, ok := strings.Cut(ref, "/")
	if !ok || secret == "" || key == "" {
		return bad("no SECRET/KEY")
	}
	c := v1alpha1.Credential{Name: name, ValueFrom: v1alpha1.CredentialSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key,
	}}}
	for _, h := range strings.Split(hosts, ",") {
		// As spec.credentials[].hosts: https:// or nothing means TLS only;
		// http:// opts a plain-HTTP destination in.
		addr := strings.TrimPrefix(strings.TrimPrefix(h, "https://"), "http://")
		host, port, err := net.SplitHostPort(addr)
		if _, perr := strconv.ParseUint(port, 10, 16); err != nil || host == "" || perr != nil {
			return bad(fmt.Sprintf("host %q has no port", h))
		}
		c.Hosts = append(c.Hosts, h)
	}
	return c, nil
}

// runCmd creates an AgentRun from flags and follows it to its end, like
// `tkn task start --showlog`; it exits with the run's outcome.
func runCmd(ctx context.Context, e *Env, fs *pflag.FlagSet, kf *kubeFlags, args []string) int {
	var s runSpec
	fs.StringVar(&s.Runtime, "runtime", "", "the agent CLI: claude-code, codex, pi or dsh")
	fs.StringVar(&s.Model, "model", "", "the model (default: the runtime's)")
	promptFile := fs.StringP("prompt-file", "f", "", "read the prompt from this file (- is stdin) instead of the argument")
	fs.StringVar(&s.Name, "name", "", "the AgentRun's name (default: generated, RUNTIME-xxxxx)")
	fs.StringVar(&s.Timeout, "timeout", "", "end the run with status timeout after this long: seconds (300) or a duration (30m, 2h); default the CRD's 1h")
	fs.StringVar(&s.TTL, "ttl", "", "remove the run's Job and Pod (and its event log) this long after the end; the AgentRun stays")
	fs.Int32Var(&s.MaxTurns, "max-turns", 0, "end the run with status limit after this many model calls of the main agent")
	fs.Int64Var(&s.MaxTokens, "max-tokens", 0, "end the run with status limit after this many tokens")
	fs.StringVar(&s.Network, "network", "", "none, full or custom (default full; --allow-host makes it custom)")
	fs.StringArrayVar(&s.AllowHosts, "allow-host", nil, "a host the agent may reach, HOST[:PORT] or *.SUFFIX (repeatable)")
	fs.StringArrayVar(&s.AddHosts, "add-host", nil, "NAME=IP for the filter proxy's resolver (repeatable)")
	fs.StringArrayVar(&s.Env, "env", nil, "NAME=VALUE in the agent's environment (repeatable; the agent can read it: keys go in --credential)")
	fs.StringArrayVar(&s.Credentials, "credential", nil, "an API key the agent never holds: "+credentialForm+" (repeatable)")
	fs.StringArrayVar(&s.Labels, "label", nil, "KEY=VALUE on the AgentRun (repeatable)")
	fs.BoolVar(&s.NoSubagents, "no-subagents", false, "do not let the agent start subagents")
	dryRun := fs.String("dry-run", "none", "client: print the AgentRun as YAML; server: also have the API server check it; none: create it")
	fs.Lookup("dry-run").NoOptDefVal = "client"
	detach := fs.BoolP("detach", "d", false, "create the run, print its name and exit without following it")
	formatName := formatFlag(fs)
	synopsis := "kubectl agentrun run --runtime RUNTIME [--model M] [-f FILE | PROMPT] [flags]"
	if code, done := parse(e, fs, kf, args, synopsis); done {
		return code
	}
	if err := checkFormat(*formatName); err != nil {
		return usageError(e, fs, "%v", err)
	}
	if *dryRun != "none" && *dryRun != "client" && *dryRun != "server" {
		return usageError(e, fs, "--dry-run %q: use client, server or none", *dryRun)
	}
	prompt, err := readPrompt(e.Stdin, *promptFile, fs.Args())
	if err != nil {
		return usageError(e, fs, "%v", err)
	}
	s.Prompt = prompt
	if *dryRun == "client" {
		run, err := s.build("")
		if err != nil {
			return usageError(e, fs, "%v", err)
		}
		return printYAML(e, fs, run)
	}
	k, err := kf.connect(e)
	if err != nil {
		return fail(e, fs, err)
	}
	run, err := s.build(k.ns)
	if err != nil {
		return usageError(e, fs, "%v", err)
	}
	if *dryRun == "server" {
		if err := k.c.Create(ctx, run, client.DryRunAll); err != nil {
			return fail(e, fs, err)
		}
		run.ManagedFields = nil
		return printYAML(e, fs, run)
	}
	if err := k.c.Create(ctx, run); err != nil {
		return fail(e, fs, err)
	}
	fmt.Fprintf(e.Stderr, "agentrun.agentrun.dev/%s created\n", run.Name)
	if *detach {
		fmt.Fprintln(e.Stdout, run.Name)
		return 0
	}
	return followRun(ctx, e, k, run.Name, *formatName)
}

// readPrompt is the prompt of -f FILE (- is stdin) or of the one argument.
func readPrompt(stdin io.Reader, file string, args []string) (string, error) {
	switch {
	case file != "" && len(args) > 0:
		return "", fmt.Errorf("the prompt comes from -f %s or from the argument, not both", file)
	case file == "" && len(args) != 1:
		return "", fmt.Errorf("expected one prompt argument, got %d: quote the prompt, or use -f FILE", len(args))
	case file == "":
		return args[0], nil
	case file == "-":
		b, err := io.ReadAll(stdin)
		return string(b), err
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("-f: %w", err)
	}
	return string(b), nil
}

// printYAML writes the AgentRun as a manifest `kubectl create -f` takes:
// without the empty status, network and creation time of an object not
// created.
func printYAML(e *Env, fs *pflag.FlagSet, run *v1alpha1.AgentRun) int {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(run)
	if err != nil {
		return fail(e, fs, err)
	}
	if st, _ := obj["status"].(map[string]any); len(st) == 0 {
		delete(obj, "status")
	}
	if md, _ := obj["metadata"].(map[string]any); md != nil && md["creationTimestamp"] == nil {
		delete(md, "creationTimestamp")
	}
	if spec, _ := obj["spec"].(map[string]any); spec != nil {
		if n, _ := spec["network"].(map[string]any); len(n) == 0 {
			delete(spec, "network") // a struct, not a pointer: {} when no flag set it
		}
	}
	b, err := yaml.Marshal(obj)
	if err != nil {
		return fail(e, fs, err)
	}
	if _, err := e.Stdout.Write(b); err != nil {
		return fail(e, fs, err)
	}
	return 0
}

// followRun shows the new run's event log until its end, then waits for
// the end in its status (the controller's harvest: the stream's end event
// is the runner's view; status adds what only the controller sees, an
// OOM kill, say) and exits with the outcome. Ctrl-C stops following only:
// the run goes on.
func followRun(ctx context.Context, e *Env, k *kube, name, formatName string) int {
	f := newFollower(e, k, name, formatName, true)
	res, err := f.show(ctx)
	f.out.close()
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(e.Stderr, "kubectl agentrun run: %v\n", err)
		if errors.As(err, new(runNotFound)) {
			return exitError // deleted while followed
		}
		// Otherwise there is no log to show (the Pod is gone, pods/log
		// is forbidden), but the status still has the outcome.
	}
	run, err := waitEnd(ctx, e, k, name)
	switch {
	case ctx.Err() != nil:
		fmt.Fprintf(e.Stderr, "Stopped following; agentrun %s goes on. Follow it again: kubectl agentrun logs -f %s; stop it: kubectl patch agentrun %s --type merge -p '{\"spec\":{\"cancel\":true}}'\n",
			name, name, name)
		return exitInterrupted
	case err != nil:
		fmt.Fprintf(e.Stderr, "kubectl agentrun run: %v\n", err)
		return exitError
	}
	if run.Status.Phase != v1alpha1.PhaseSucceeded || !res.sawEnd {
		fmt.Fprintf(e.Stderr, "agentrun %s: %s\n", name, outcome(run))
	}
	return runExitCode(run)
}

// waitEnd polls the run until its status says it has ended.
func waitEnd(ctx context.Context, e *Env, k *kube, name string) (*v1alpha1.AgentRun, error) {
	for {
		run := &v1alpha1.AgentRun{}
		if err := k.c.Get(ctx, client.ObjectKey{Namespace: k.ns, Name: name}, run); err != nil {
			return nil, err
		}
		if ended(run) {
			return run, nil
		}
		if !sleep(ctx, e.Poll) {
			return nil, ctx.Err()
		}
	}
}

// runExitCode is the exit code of an ended run: agentrun's for its end
// status, 1 for a failure without one (the Pod ended without a summary).
func runExitCode(run *v1alpha1.AgentRun) int {
	if code, ok := runExitCodes[run.Status.EndStatus]; ok {
		return code
	}
	if run.Status.Phase == v1alpha1.PhaseSucceeded {
		return 0
	}
	return 1
}
