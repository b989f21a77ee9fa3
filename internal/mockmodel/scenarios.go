package mockmodel

// Scenario is one scripted conversation: a prompt that holds
// "scenario:NAME" gets it.
type Scenario struct {
	Name string
	What string // what the mock answers, in a line
}

// Scenarios are the scripted conversations (mainReply holds their
// scripts), for mockmodel --help and the docs. A prompt without a marker
// gets a short answer ("OK", or "Mock session" on the Anthropic API).
var Scenarios = []Scenario{
	{"tool", "a Bash call that writes hello.txt, then \"Done: wrote hello.txt\""},
	{"parallel", "thinking, a text and two Bash calls at once (ls, echo two), then a five-line text"},
	{"subagent", "a text and an Agent call (a foreground subagent that runs echo sub), then \"Main done after subagent\" (claude-code; the OpenAI APIs answer the main agent's text alone)"},
	{"background", "as subagent, with the subagent in the background (its reply delayed by --subagent-delay)"},
	{"denied", "a Bash call of rm -rf /tmp/agentrun-denied-probe, which the mock flags so that claude-code's auto mode refuses it, then a text"},
	{"nethost", "a Bash call of curl http://blocked.example/, which the filter proxy refuses, then \"The host was blocked.\""},
	{"probe", "runs the command between probe<<< and >>> in the prompt with Bash, then answers with its output"},
	{"error401", "HTTP 401 authentication_error (a wrong key)"},
	{"error500", "HTTP 500 api_error (the API failing)"},
	{"slow", "streams \"slow \" every --slow-interval (500ms) for up to two minutes: a slow model, or one to interrupt"},
}
