package pi

import (
	"encoding/json"

	"github.com/agentrun-dev/agentrun/events/records"
)

// summary is the one-line description of a pi tool call: the tool's name
// and its most telling argument ("bash: ls", "read: src/main.go", "grep:
// parse_line in src").
func summary(name string, raw json.RawMessage) string {
	var in toolArgs
	if len(raw) > 0 && raw[0] == '{' {
		_ = json.Unmarshal(raw, &in)
	}
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
