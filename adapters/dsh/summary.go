package dsh

import (
	"strings"

	"github.com/agentrun-dev/agentrun/events/records"
	"github.com/agentrun-dev/agentrun/internal/wirejson"
)

// summary is the one-line description of a dsh tool call: the tool's name
// and its most telling argument ("bash: ls", "read: src/main.go", "grep:
// parse_line in src", "subagent: Find the callers"). raw is the arguments'
// JSON as the model wrote it.
func summary(name, raw string) string {
	in := toolArgsOf(raw)
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

// toolArgsOf reads the arguments the model wrote when they are a JSON
// object. Invalid JSON reads as no arguments, as with json.Unmarshal, which
// decodes nothing from it (a field of an unexpected type is skipped and
// the rest kept, as there).
func toolArgsOf(raw string) toolArgs {
	var in toolArgs
	if strings.HasPrefix(strings.TrimSpace(raw), "{") {
		var d wirejson.Decoder
		d.Reset([]byte(raw))
		if decodeToolArgs(&d, &in) != nil || d.End() != nil {
			return toolArgs{}
		}
	}
	return in
}
