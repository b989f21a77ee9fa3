module github.com/agentrun-dev/agentrun

go 1.26.8

require (
	golang.org/x/term v0.48.0
	golang.org/x/text v0.44.0
)

require golang.org/x/sys v0.50.0 // indirect
