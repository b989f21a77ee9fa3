package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/agentrun-dev/agentrun/internal/sibling"
)

// validateBinary serves `agentrun validate` (cmd/agentrun-validate): the
// JSON Schema library it links would slow every start of agentrun.
const validateBinary = "agentrun-validate"

// findValidator is validateBinary beside the agentrun binary at self, else
// on PATH (go run, or a go install into a directory on PATH).
func findValidator(self string) (string, error) {
	p, beside := sibling.Of(self, validateBinary)
	if beside {
		return p, nil
	}
	if p, err := exec.LookPath(validateBinary); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("%s is neither beside agentrun (%s) nor on PATH: make build puts both in bin/ "+
		"(or go build -o %s ./cmd/agentrun-validate)", validateBinary, filepath.Dir(self), p)
}

// validateCmd runs validateBinary with the verb's arguments and streams and
// ends with its exit code: 0 for a valid stream, 1 for an invalid one, 2
// for a usage error (and when the validator is not installed).
func validateCmd(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "agentrun validate: %v\n", err)
		return 2
	}
	bin, err := findValidator(self)
	if err != nil {
		fmt.Fprintf(stderr, "agentrun validate: %v\n", err)
		return 2
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		return exit.ExitCode()
	default:
		fmt.Fprintf(stderr, "agentrun validate: %s: %v\n", bin, err)
		return 2
	}
}
