package nodeprofiles

import (
	"bytes"
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

// AppArmor3 is the profile for nodes whose AppArmor predates 4.0 (Ubuntu
// 22.04, Debian 12): abi 3.0, without the `userns,` rule it does not know.
// Those kernels do not mediate user namespaces, so nothing is lost.
func AppArmor3() []byte {
	p := bytes.Replace(appArmor, []byte("abi <abi/4.0>,"), []byte("abi <abi/3.0>,"), 1)
	return bytes.Replace(p, []byte("\n  userns,\n"), []byte("\n"), 1)
}

func jsonIndent(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	return append(b, '\n'), err
}
