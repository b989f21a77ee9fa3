package mockmodel

import (
	"fmt"
	"regexp"
	"strings"
)

// conv is what the mock knows about the conversation of one request.
type conv struct {
	Scenario string // scenario name, "" for side calls
	Role     string // RoleMain, RoleSubagent or RoleSide
	Kind     string // subagent name ("fg", "bg") or side-call kind
	Step     int    // assistant turns already in the conversation
}

// subagentScenario maps a subagent marker to the scenario that launched it.
var subagentScenario = map[string]string{"fg": "subagent", "bg": "background"}

func classify(req *messagesRequest) conv {
	step := req.assistantTurns()
	if !isAgentLoop(req) {
		// Side calls may quote the conversation (and so its markers) in a
		// transcript; only requests of an agent loop take part in a script.
		return conv{Role: RoleSide, Kind: sideKind(req), Step: step}
	}
	sc, sub := markers(req.firstUserText())
	switch {
	case sub != "":
		name := subagentScenario[sub]
		if name == "" {
			name = sc
		}
		return conv{Scenario: name, Role: RoleSubagent, Kind: sub, Step: step}
	case sc != "":
		return conv{Scenario: sc, Role: RoleMain, Step: step}
	}
	return conv{Role: RoleSide, Kind: sideKind(req), Step: step}
}

// isAgentLoop tells a request of an agent loop (it offers tools) from a side
// call such as the auto-mode classifier, which offers none.
func isAgentLoop(req *messagesRequest) bool {
	return len(req.Tools) > 0
}

// Side-call kinds.
const (
	SideClassifier = "classifier" // auto mode's local "security monitor"
	SideTitle      = "title"      // session title / summary generation
	SideOther      = "other"
)

func sideKind(req *messagesRequest) string {
	for _, s := range req.StopSequences {
		if s == "</severity>" {
			return SideClassifier
		}
	}
	sys := req.systemText()
	if strings.Contains(sys, "security monitor") || strings.Contains(sys, "<severity>") {
		return SideClassifier
	}
	lower := strings.ToLower(sys)
	if strings.Contains(lower, "title") {
		return SideTitle
	}
	return SideOther
}

// Usage schemes: fixed, distinct per role, a function of the step only.
func mainUsage(k int) Usage {
	return Usage{InputTokens: int64(10 + k), CacheWriteTokens: int64(100 * (k + 1)), CacheReadTokens: int64(1000 * k), OutputTokens: int64(20 + 5*k)}
}

func subagentUsage(k int) Usage {
	return Usage{InputTokens: int64(40 + k), CacheWriteTokens: int64(50 * (k + 1)), CacheReadTokens: int64(2000 + 500*k), OutputTokens: int64(60 + 7*k)}
}

func sideUsage(kind string) Usage {
	switch kind {
	case SideClassifier:
		return Usage{InputTokens: 800, OutputTokens: 8}
	case SideTitle:
		return Usage{InputTokens: 600, OutputTokens: 6}
	}
	return Usage{InputTokens: 500, OutputTokens: 5}
}

func text(s string) block { return block{Type: "text", Text: s} }

func bash(cmd, desc string) block {
	return block{Type: "tool_use", ToolName: "Bash", ToolInput: obj{{"command", cmd}, {"description", desc}}}
}

// agentTool is the name of the subagent tool in the request's tool list.
func agentTool(req *messagesRequest) string {
	if !req.hasTool("Agent") && req.hasTool("Task") {
		return "Task"
	}
	return "Agent"
}

func (s *Server) reply(c conv, req *messagesRequest) reply {
	var r reply
	switch c.Role {
	case RoleMain:
		r = mainReply(c, req)
		r.Usage = mainUsage(c.Step)
	case RoleSubagent:
		r = subagentReply(c, req)
		r.Usage = subagentUsage(c.Step)
		if c.Kind == "bg" && s.opts.SubagentDelay > 0 {
			r.delay = s.opts.SubagentDelay
		}
	default:
		r = sideReply(c, req)
		r.Usage = sideUsage(c.Kind)
	}
	if c.Role != RoleSide && s.opts.ReplyDelay > r.delay {
		r.delay = s.opts.ReplyDelay
	}
	r.Safeguards = !s.opts.NoSafeguards && req.wantsSafeguard("dangerous_tool_use")
	return r
}

func mainReply(c conv, req *messagesRequest) reply {
	k := c.Step
	switch c.Scenario {
	case "tool":
		if k == 0 {
			return reply{Blocks: []block{bash("echo hello > hello.txt", "Write hello.txt")}}
		}
		return reply{Blocks: []block{text("Done: wrote hello.txt")}}
	case "parallel":
		if k == 0 {
			return reply{Blocks: []block{
				{Type: "thinking", Text: "I should list the files and echo a word, both at once."},
				text("Running two commands in parallel."),
				bash("ls", "List files"),
				bash("echo two", "Echo two"),
			}}
		}
		return reply{Blocks: []block{text("Both commands finished.\nline 2: ls listed the workspace\nline 3: echo printed two\nline 4: nothing failed\nline 5: done")}}
	case "subagent", "background":
		bg := c.Scenario == "background"
		marker := "subagent:fg"
		if bg {
			marker = "subagent:bg"
		}
		switch {
		case k == 0 && !req.hasTool("Agent") && !req.hasTool("Task"):
			// A model cannot call a tool it is not offered (agentrun run
			// --no-subagents takes it away).
			return reply{Blocks: []block{text(NoSubagentToolReply)}}
		case k == 0:
			return reply{Blocks: []block{
				text("Delegating to a subagent."),
				{Type: "tool_use", ToolName: agentTool(req), ToolInput: obj{
					{"description", "Run one command"},
					{"prompt", marker + " Run `echo sub` with Bash, then reply with a short report."},
					{"subagent_type", "general-purpose"},
					{"run_in_background", bg},
				}},
			}}
		case bg && k == 1:
			return reply{Blocks: []block{text("Subagent launched in the background; waiting for its result.")}}
		case bg:
			return reply{Blocks: []block{text("Background result received")}}
		}
		return reply{Blocks: []block{text("Main done after subagent")}}
	case "denied":
		if k == 0 {
			b := bash(deniedCommand, "Delete the probe directory")
			b.Flagged = deniedExplanation
			return reply{Blocks: []block{b}}
		}
		return reply{Blocks: []block{text("The command was denied; stopping here.")}}
	case "nethost":
		// A command that needs a host the run does not allow: the filter
		// proxy refuses it and curl fails.
		if k == 0 {
			return reply{Blocks: []block{bash("curl -sf -m 10 http://blocked.example/", "Fetch a page")}}
		}
		return reply{Blocks: []block{text("The host was blocked.")}}
	case "probe":
		return probeReply(k, req.firstUserText(), req.lastToolResult())
	case "error401":
		return reply{Status: 401, ErrType: "authentication_error", ErrMsg: "invalid x-api-key"}
	case "error500":
		return reply{Status: 500, ErrType: "api_error", ErrMsg: "Internal server error"}
	case "slow":
		return reply{Blocks: []block{text("")}, Slow: true, SlowChunk: "slow "}
	}
	return reply{Blocks: []block{text(fmt.Sprintf("mockmodel: unknown scenario %q", c.Scenario))}}
}

// probeReply runs the command the prompt gives between "probe<<<" and
// ">>>", then answers with its output: a test sees what the agent saw.
func probeReply(step int, prompt, lastResult string) reply {
	if step == 0 {
		cmd := probeCommand(prompt)
		if cmd == "" {
			return reply{Blocks: []block{text("mockmodel: the probe scenario needs probe<<<COMMAND>>> in the prompt")}}
		}
		return reply{Blocks: []block{bash(cmd, "Probe the sandbox")}}
	}
	return reply{Blocks: []block{text(ProbeAnswerPrefix + lastResult)}}
}

// NoSubagentToolReply is the answer of the subagent scenarios when the
// request offers no subagent tool.
const NoSubagentToolReply = "No subagent tool is offered, so I will not delegate."

// ProbeAnswerPrefix starts the answer of the "probe" scenario, followed by
// the command's output.
const ProbeAnswerPrefix = "Probe output:\n"

var probeRe = regexp.MustCompile(`(?s)probe<<<(.*?)>>>`)

// probeCommand is the command of the "probe" scenario in the prompt text.
func probeCommand(prompt string) string {
	if m := probeRe.FindStringSubmatch(prompt); m != nil {
		return strings.TrimSpace(m[1])
	}
	return ""
}

// deniedCommand is the Bash command of the "denied" scenario.
const deniedCommand = "rm -rf /tmp/agentrun-denied-probe"

// deniedExplanation is the safety check's explanation for flagging it.
const deniedExplanation = "mockmodel: the denied scenario flags this call"

func subagentReply(c conv, req *messagesRequest) reply {
	switch {
	case c.Step == 0:
		return reply{Blocks: []block{bash("echo sub", "Echo sub")}}
	case c.Step == 1 && req.hasTool("SubagentHandback"):
		// claude-code 2.1.3xx only delivers a subagent's report through this
		// tool; plain final text is answered with a reminder to call it.
		return reply{Blocks: []block{{Type: "tool_use", ToolName: "SubagentHandback", ToolInput: obj{{"message", "sub report"}}}}}
	}
	return reply{Blocks: []block{text("sub report")}}
}

// Classifier verdicts: severity below 50 allows, above blocks.
const (
	allowSeverity = 2
	blockSeverity = 95
)

func sideReply(c conv, req *messagesRequest) reply {
	switch c.Kind {
	case SideClassifier:
		sev := allowSeverity
		category := ""
		if strings.Contains(req.allText(), deniedCommand) {
			sev, category = blockSeverity, "Irreversible Local Destruction"
		}
		for _, s := range req.StopSequences {
			if s == "</severity>" {
				// Stage 1: the answer stops at the stop sequence.
				return reply{Blocks: []block{text(fmt.Sprintf("<severity>%d", sev))}, StopReason: "stop_sequence", StopSequence: s}
			}
		}
		out := fmt.Sprintf("<thinking>mockmodel verdict.</thinking>\n<severity>%d</severity>", sev)
		if category != "" {
			out += "<category>" + category + "</category>"
		}
		return reply{Blocks: []block{text(out)}}
	case SideTitle:
		return reply{Blocks: []block{text("Mock session")}}
	}
	return reply{Blocks: []block{text("OK")}}
}
