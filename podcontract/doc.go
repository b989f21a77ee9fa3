// Package podcontract is the contract between the controller and an agent
// Pod, both ends side by side (as Tekton keeps its termination and
// sidecar-log protocols): what the controller writes into the Pod, and what
// the runner and the events sidecar read from it and hand back.
//
//   - flags.go: the command lines of `agentrun run` (RunFlags) and of the
//     events sidecar, `agentrun tail` (TailFlags), as structs that render
//     the container arguments (Args, the controller's side) and bind them
//     (Register, the runner's side). A flag is spelled here only.
//   - paths.go: the container names, the paths inside the Pod and the live
//     progress port.
//   - termination.go: the end summary, the agent container's termination
//     message, written by the runner and decoded by the controller.
//
// It imports no Kubernetes package: the runner, which has no API access,
// links it as the controller does.
package podcontract
