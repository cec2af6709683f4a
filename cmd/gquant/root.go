package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/gquant/gquant/internal/mapped"
	"github.com/gquant/gquant/internal/problems"
)

// version is gquant's version, stamped into outputs and reports.
const version = "0.1.0-dev"

// Exit codes (DESIGN.md): 0 ok, 1 error, 2 usage, 3 a verify threshold failed.
const (
	exitOK        = 0
	exitError     = 1
	exitUsage     = 2
	exitThreshold = 3
)

// codedError carries an exit code to main.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &codedError{exitUsage, fmt.Errorf(format, args...)}
}

// argsN validates the positional argument count as a usage error.
func argsN(min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < min || (max >= 0 && len(args) > max) {
			return usageErr("%s: wrong number of arguments (usage: %s)", cmd.Name(), cmd.UseLine())
		}
		return nil
	}
}

// globals are flags every command shares.
type globals struct {
	quiet bool
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "gquant",
		Short:         "Convert, quantize, run and verify LLM checkpoints",
		Long:          "gquant turns a HuggingFace bf16 checkpoint into quantized artifacts (GGUF, gqf) and measures how faithful each one is.",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().BoolVarP(&g.quiet, "quiet", "q", false, "no progress or log output on stderr")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &codedError{exitUsage, fmt.Errorf("%s: %v", c.Name(), err)}
	})
	root.AddCommand(
		newConvertCmd(g),
		newInspectCmd(g),
	)
	for _, extra := range extraCommands {
		root.AddCommand(extra(g))
	}
	return root
}

// extraCommands lets each verb's file register itself.
var extraCommands []func(*globals) *cobra.Command

func execute(args []string, stdout, stderr io.Writer) (code int) {
	// A mapped input that shrinks under us faults: a one-line error naming it, not a crash.
	// (Every output's deferred Abort has run by the time the panic gets here.)
	mapped.Guard()
	defer mapped.Recover(func(err error) {
		fmt.Fprintf(stderr, "gquant: %s\n", oneLine(err.Error()))
		code = exitError
	})
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	code = exitError
	var ce *codedError
	var ue *problems.UsageError
	if errors.As(err, &ce) {
		code = ce.code
	} else if errors.As(err, &ue) || isCobraUsage(err) {
		code = exitUsage
	}
	fmt.Fprintf(stderr, "gquant: %s\n", oneLine(err.Error()))
	return code
}

// isCobraUsage recognises cobra's own usage errors (unknown command or flag).
func isCobraUsage(err error) bool {
	s := err.Error()
	return strings.HasPrefix(s, "unknown command") || strings.HasPrefix(s, "unknown flag") ||
		strings.HasPrefix(s, "unknown shorthand flag") || strings.Contains(s, "requires at least") ||
		strings.Contains(s, "accepts ")
}

// oneLine folds an error message onto one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, "\r", "")
	return strings.ReplaceAll(s, "\n", "; ")
}

// stderrIsTerminal decides whether progress bars are drawn.
func stderrIsTerminal() bool { return term.IsTerminal(int(os.Stderr.Fd())) }
