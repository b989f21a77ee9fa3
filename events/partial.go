package events

// Partial is a piece of text an agent is writing, as the runtime streams
// it before the complete text event. It is not an event of the stream
// (the text event that follows holds the whole text): the runner hands
// it to a live view (format.Live) only, so that a person can tell a slow
// model from a hung one, and a saved stream never holds it.
type Partial struct {
	// Parent is nil for the main agent, else the subagent's id, as in
	// the events.
	Parent *string
	// Text is the new piece, appended to what the agent wrote since its
	// latest text or tool call.
	Text string
}
