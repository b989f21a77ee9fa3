package nodeprofiles

import (
	_ "embed"
	"encoding/json"
)

// AppArmorName is the AppArmor profile's name, as a Pod names it
// (appArmorProfile: {type: Localhost, localhostProfile: AppArmorName}).
const AppArmorName = "agentrun-bwrap"

//go:embed agentrun-bwrap.apparmor
var appArmor []byte

// AppArmor is the agent container's AppArmor profile: what a container may
// do under the runtime's default profile, plus user namespaces and the
// mounts bubblewrap makes in them (the default profile denies mount and,
// on Ubuntu 24.04 and later, unprivileged user namespaces).
func AppArmor() []byte { return appArmor }

func jsonIndent(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	return append(b, '\n'), err
}
