//go:build !libcni12

package main

import (
	"context"
	"fmt"

	"github.com/containernetworking/cni/libcni"
)

// libcni 1.1 has neither GC nor STATUS.
func extra(_ context.Context, _ *libcni.CNIConfig, _ *libcni.NetworkConfigList, command string, _ []string) error {
	return fmt.Errorf("unknown command %s (libcni 1.1 has no gc or status)", command)
}
