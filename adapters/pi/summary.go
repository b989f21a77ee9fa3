package pi

import "github.com/agentrun-dev/agentrun/events/records"

// summary is the one-line description of a pi tool call: the tool's name
// and its most telling argument ("bash: ls", "read: src/main.go", "grep:
// parse_line in src"); in are its arguments (Adapter.toolArgs).
func summary(name string, in toolArgs) string {
	detail := ""
	switch {
	case in.Command != "":
		detail = in.Command
	case in.Pattern != "":
		detail = in.Pattern
		if in.Path != "" {
			detail += " in " + in.Path
		}
	case in.Path != "":
		detail = in.Path
	}
	return records.Summary(name, detail)
}
