package kubetest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// netnsEnv marks the test process run inside the private network
// namespace.
const netnsEnv = "LLMEDGE_KUBETEST_NETNS"

// PrivateNetwork runs the calling top-level test in a private network
// namespace of its own (`unshare -n`, or `unshare -rn` without root), where
// addrs (e.g. "10.77.0.11") are on the loopback interface. EndpointSlices
// refuse loopback addresses (127.0.0.0/8), so replicas a slice names must
// listen on such addresses, and the gateway must reach them: everything
// of the test (etcd, the API server, replicas, gateway) runs in the
// namespace, which nothing else on the machine can see.
//
// In the test process as started it re-runs the test in the namespace,
// passes its verdict and output on, and returns false: the caller returns
// at once. In the namespace it sets the addresses up and returns true.
// extraEnv is more environment for the re-run (what TestMain built).
func PrivateNetwork(t *testing.T, addrs []string, extraEnv ...string) bool {
	t.Helper()
	if os.Getenv(netnsEnv) == t.Name() {
		if out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput(); err != nil {
			t.Fatalf("ip link set lo up: %v %s", err, out)
		}
		for _, a := range addrs {
			if out, err := exec.Command("ip", "addr", "add", a+"/32", "dev", "lo").CombinedOutput(); err != nil {
				t.Fatalf("ip addr add %s: %v %s", a, err, out)
			}
		}
		return true
	}
	for _, tool := range []string{"unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := tool + " is missing (util-linux, iproute2): the Kubernetes tests run in a private network namespace"
			if testing.Short() {
				t.Skip(msg)
			}
			t.Fatal(msg)
		}
	}
	flags := "-n"
	if os.Getuid() != 0 {
		flags = "-rn" // a user namespace makes us root in the new network namespace
	}
	args := []string{flags, "--", os.Args[0], "-test.run=^" + t.Name() + "$", "-test.count=1", "-test.v"}
	if d, ok := t.Deadline(); ok {
		args = append(args, "-test.timeout="+time.Until(d).Round(time.Second).String())
	}
	cmd := exec.Command("unshare", args...)
	cmd.Env = append(append(os.Environ(), netnsEnv+"="+t.Name()), extraEnv...)
	out, err := cmd.CombinedOutput()
	t.Logf("in a private network namespace:\n%s", indent(string(out)))
	if err != nil {
		t.Fatalf("%s in its private network namespace: %v", t.Name(), err)
	}
	if strings.Contains(string(out), "--- SKIP: "+t.Name()) {
		t.Skip("skipped in the namespace")
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatal(fmt.Sprintf("%s did not run in its private network namespace", t.Name()))
	}
	return false
}

func indent(s string) string {
	return "\t" + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n\t")
}
