package dsh

import (
	"encoding/json"
	"strings"

	"github.com/agentrun-dev/agentrun/events/records"
)

// summary is the one-line description of a dsh tool call: the tool's name
// and its most telling argument ("bash: ls", "read: src/main.go", "grep:
// parse_line in src", "subagent: Find the callers"). raw is the arguments'
// JSON as the model wrote it.
func summary(name, raw string) string {
	var in toolArgs
	if strings.HasPrefix(strings.TrimSpace(raw), "{") {
		_ = json.Unmarshal([]byte(raw), &in)
	}
	path := in.FilePath
	if path == "" {
		path = in.Path
	}
	detail := ""
	switch {
	case in.Command != "" && name == "str_replace_editor":
		detail = in.Command + " " + path
	case in.Command != "":
		detail = in.Command
	case in.Pattern != "":
		detail = in.Pattern
		if path != "" {
			detail += " in " + path
		}
	case path != "":
		detail = path
	case len(in.Queries) > 0:
		detail = strings.Join(in.Queries, "; ")
	case in.Description != "":
		detail = in.Description
	case in.Objective != "":
		detail = in.Objective
	case in.Name != "":
		detail = in.Name
	case in.JobID != "":
		detail = in.JobID
	}
	return records.Summary(name, detail)
}
