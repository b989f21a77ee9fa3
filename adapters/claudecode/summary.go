package claudecode

import (
	"fmt"

	"github.com/agentrun-dev/agentrun/events/records"
)

// summary is the one-line description of a claude-code tool call: the tool's
// name and its most telling argument.
func summary(name string, in toolInput) string {
	detail := ""
	switch {
	case in.Command != "":
		detail = in.Command
	case in.FilePath != "":
		detail = in.FilePath
	case in.NotebookPath != "":
		detail = in.NotebookPath
	case in.Pattern != "":
		detail = in.Pattern
		if in.Path != "" {
			detail += " in " + in.Path
		}
	case in.URL != "":
		detail = in.URL
	case in.Query != "":
		detail = in.Query
	case in.Skill != "":
		detail = in.Skill
	case in.Path != "":
		detail = in.Path
	case in.TaskID != "":
		detail = in.TaskID
	case len(in.Todos) > 0:
		detail = fmt.Sprintf("%d items", len(in.Todos))
	case in.Description != "":
		detail = in.Description
	}
	return records.Summary(name, detail)
}
