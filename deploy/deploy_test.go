// Package deploy holds the Kubernetes Job and the container image
// definition of a fleet of loaders; its test checks their structure, since
// neither a cluster nor a container engine runs here.
package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/cosmosloader/loader/cmd"
)

// job is the part of a batch/v1 Job the test reads.
type job struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		CompletionMode       string `json:"completionMode"`
		Completions          *int   `json:"completions"`
		Parallelism          *int   `json:"parallelism"`
		BackoffLimitPerIndex *int   `json:"backoffLimitPerIndex"`
		PodFailurePolicy     *struct {
			Rules []struct {
				Action      string `json:"action"`
				OnExitCodes *struct {
					ContainerName string `json:"containerName"`
					Operator      string `json:"operator"`
					Values        []int  `json:"values"`
				} `json:"onExitCodes"`
				OnPodConditions []struct {
					Type string `json:"type"`
				} `json:"onPodConditions"`
			} `json:"rules"`
		} `json:"podFailurePolicy"`
		Template struct {
			Spec struct {
				RestartPolicy string `json:"restartPolicy"`
				Containers    []struct {
					Name  string   `json:"name"`
					Image string   `json:"image"`
					Args  []string `json:"args"`
					Env   []struct {
						Name      string `json:"name"`
						Value     string `json:"value"`
						ValueFrom *struct {
							SecretKeyRef *struct {
								Name string `json:"name"`
								Key  string `json:"key"`
							} `json:"secretKeyRef"`
							FieldRef *struct {
								FieldPath string `json:"fieldPath"`
							} `json:"fieldRef"`
						} `json:"valueFrom"`
					} `json:"env"`
					Resources struct {
						Requests map[string]string `json:"requests"`
					} `json:"resources"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

func readJob(t *testing.T) *job {
	t.Helper()
	b, err := os.ReadFile("job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var j job
	if err := yaml.Unmarshal(b, &j); err != nil {
		t.Fatalf("job.yaml: %v", err)
	}
	return &j
}

// The Job is an Indexed Job of one pod per index, run at once, whose
// failures are handled by its pod failure policy: a usage error fails the
// Job, a disruption is retried without counting, anything else counts.
func TestJobIsAnIndexedFleet(t *testing.T) {
	j := readJob(t)
	s := j.Spec
	if j.APIVersion != "batch/v1" || j.Kind != "Job" {
		t.Fatalf("%s %s, want a batch/v1 Job", j.APIVersion, j.Kind)
	}
	if s.CompletionMode != "Indexed" {
		t.Errorf("completionMode %q, want Indexed", s.CompletionMode)
	}
	if s.Completions == nil || s.Parallelism == nil || *s.Completions != *s.Parallelism || *s.Completions < 2 {
		t.Errorf("completions %v, parallelism %v: want the same, at least 2 (every loader at once)", s.Completions, s.Parallelism)
	}
	if s.BackoffLimitPerIndex == nil || *s.BackoffLimitPerIndex < 1 {
		t.Error("backoffLimitPerIndex unset: a crashed pod's index would not run again")
	}
	if s.Template.Spec.RestartPolicy != "Never" {
		t.Errorf("restartPolicy %q: a pod failure policy needs Never", s.Template.Spec.RestartPolicy)
	}
	if s.PodFailurePolicy == nil {
		t.Fatal("no podFailurePolicy")
	}
	var failJob, disruption bool
	for _, r := range s.PodFailurePolicy.Rules {
		if ec := r.OnExitCodes; ec != nil {
			if ec.ContainerName != "loader" {
				t.Errorf("rule %s names container %q", r.Action, ec.ContainerName)
			}
			if r.Action == "FailJob" && ec.Operator == "In" && slices.Contains(ec.Values, 2) {
				failJob = true
			}
			if r.Action == "Ignore" && ec.Operator == "In" && slices.Contains(ec.Values, 4) {
				t.Error("exit 4 (stopped early) is ignored: it would run again forever")
			}
		}
		for _, c := range r.OnPodConditions {
			if c.Type == "DisruptionTarget" && r.Action == "Ignore" {
				disruption = true
			}
		}
	}
	if !failJob {
		t.Error("no rule fails the Job on a usage error (exit 2)")
	}
	if !disruption {
		t.Error("no rule runs a disrupted pod's index again without counting it")
	}
}

// The container runs `loader import` with flags that exist, its secrets
// from a Secret through the environment the loader reads (never in the
// arguments, which `kubectl describe` shows), its completion index where
// it names a file, and resource requests.
func TestJobRunsLoaderImport(t *testing.T) {
	j := readJob(t)
	cs := j.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "loader" || cs[0].Image == "" {
		t.Fatalf("containers %+v, want one named loader with an image", cs)
	}
	c := cs[0]
	if len(c.Args) < 2 || c.Args[0] != "import" {
		t.Fatalf("args %q, want import and the inputs", c.Args)
	}
	imp := cmd.NewCmdImport(cmd.NewFactory(), nil)
	secretFlags := []string{"key", "connection-string", "lease-connection-string", "source-connection-string"}
	for _, a := range c.Args[1:] {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if imp.Flags().Lookup(name) == nil {
			t.Errorf("%s: no such flag on loader import", a)
		}
		if slices.Contains(secretFlags, name) {
			t.Errorf("%s: a secret in the arguments; pass it through the environment", a)
		}
	}
	env := map[string]bool{}
	for _, e := range c.Env {
		env[e.Name] = true
		if e.Value != "" && strings.Contains(strings.ToUpper(e.Name), "KEY") {
			t.Errorf("env %s has a literal value: take it from a Secret", e.Name)
		}
	}
	for _, name := range []string{"COSMOS_ENDPOINT", "COSMOS_KEY", "LOADER_LEASE_CONNECTION_STRING"} {
		found := false
		for _, e := range c.Env {
			if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name != "" {
				found = true
			}
		}
		if !found {
			t.Errorf("env %s: want it from a Secret (secretKeyRef)", name)
		}
	}
	for _, a := range c.Args {
		for _, m := range regexp.MustCompile(`\$\(([A-Z_]+)\)`).FindAllStringSubmatch(a, -1) {
			if !env[m[1]] {
				t.Errorf("%s refers to $(%s), which the container does not define", a, m[1])
			}
		}
	}
	index := false
	for _, e := range c.Env {
		if e.Name == "JOB_COMPLETION_INDEX" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
			strings.Contains(e.ValueFrom.FieldRef.FieldPath, "job-completion-index") {
			index = true
		}
	}
	if !index {
		t.Error("JOB_COMPLETION_INDEX is not taken from the pod's completion index")
	}
	for _, r := range []string{"cpu", "memory"} {
		if c.Resources.Requests[r] == "" {
			t.Errorf("no %s request", r)
		}
	}
}

// The image is a static binary on a minimal base, run as a non-root user.
func TestDockerfileBuildsAStaticImage(t *testing.T) {
	f, err := os.Open("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var from, run, entry []string
	user := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		word, rest, _ := strings.Cut(line, " ")
		switch strings.ToUpper(word) {
		case "FROM":
			from = append(from, rest)
		case "RUN":
			run = append(run, rest)
		case "ENTRYPOINT":
			entry = append(entry, rest)
		case "USER":
			user = rest
		}
	}
	if len(from) < 2 {
		t.Fatalf("FROM %q: want a build stage and a runtime stage", from)
	}
	if !strings.Contains(from[len(from)-1], "distroless/static") {
		t.Errorf("runtime base %q, want distroless/static", from[len(from)-1])
	}
	if !slices.ContainsFunc(run, func(r string) bool {
		return strings.Contains(r, "CGO_ENABLED=0") && strings.Contains(r, "go build")
	}) {
		t.Errorf("RUN %q: want CGO_ENABLED=0 go build", run)
	}
	if len(entry) != 1 || entry[0] != `["/loader"]` {
		t.Errorf("ENTRYPOINT %q, want [\"/loader\"]", entry)
	}
	if !strings.HasPrefix(user, "nonroot") {
		t.Errorf("USER %q, want nonroot", user)
	}
	// The static build must be possible: no package of the loader needs
	// cgo.
	list := exec.Command("go", "list", "-e", "-deps", "-f", "{{if .Error}}{{.ImportPath}}: {{.Error}}{{end}}", "..")
	list.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := list.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("with CGO_ENABLED=0 the loader does not build:\n%s", s)
	}
}
