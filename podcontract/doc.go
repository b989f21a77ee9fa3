// Package podcontract is the contract between the controller and an agent
// Pod, both ends side by side: what the controller writes into the Pod and
// what the runner and the events sidecar read from it, and back.
//
//   - the end summary (termination.go): the agent container's termination
//     message, written by the runner and decoded by the controller.
//
// It imports no Kubernetes package: the runner, which has no API access,
// links it as the controller does.
package podcontract
