package codex

import (
	"path/filepath"
	"strings"

	"github.com/agentrun-dev/agentrun/events/records"
)

// summary is the one-line description of a codex item: its type and its
// most telling field. A command is shown as the model wrote it, without
// the `bash -lc` wrapper codex runs it in.
func summary(it *wireItem) string {
	detail := ""
	switch {
	case it.Command != "":
		detail = unwrapShell(it.Command)
	case len(it.Changes) > 0:
		parts := make([]string, 0, len(it.Changes))
		for _, c := range it.Changes {
			parts = append(parts, strings.TrimSpace(c.Kind+" "+c.Path))
		}
		detail = strings.Join(parts, ", ")
	case it.Server != "" || it.Tool != "":
		detail = strings.Trim(it.Server+"/"+it.Tool, "/")
	case it.Query != "":
		detail = it.Query
	}
	return records.Summary(it.Type, detail)
}

// unwrapShell returns SCRIPT of a `bash -lc SCRIPT` command line (codex
// reports each command as the shell invocation it ran, the script quoted),
// else the line as it is.
func unwrapShell(cmd string) string {
	words, ok := shellWords(cmd)
	if !ok || len(words) != 3 {
		return cmd
	}
	switch filepath.Base(words[0]) {
	case "bash", "sh", "zsh", "dash":
	default:
		return cmd
	}
	switch words[1] {
	case "-c", "-lc", "-cl":
		return words[2]
	}
	return cmd
}

// shellWords splits s into words as a POSIX shell does with quotes and
// backslashes, expanding nothing; false when a quote is not closed.
func shellWords(s string) ([]string, bool) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case '"':
			closed := false
			for i++; i < len(s); i++ {
				if s[i] == '"' {
					closed = true
					break
				}
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\"\\\n", s[i+1]) >= 0 {
					i++
					if s[i] == '\n' {
						continue
					}
				}
				cur.WriteByte(s[i])
			}
			if !closed {
				return nil, false
			}
			inWord = true
		case '\\':
			if i+1 < len(s) {
				i++
				if s[i] != '\n' {
					cur.WriteByte(s[i])
				}
			}
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, true
}
