//go:build libcni12

package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
)

func extra(ctx context.Context, cni *libcni.CNIConfig, list *libcni.NetworkConfigList, command string, rest []string) error {
	switch command {
	case "status":
		return cni.GetStatusNetworkList(ctx, list)
	case "gc":
		// Each argument a live attachment, containerID/ifName; GC releases the others.
		valid := make([]types.GCAttachment, 0, len(rest))
		for _, a := range rest {
			id, ifName, ok := strings.Cut(a, "/")
			if !ok {
				return fmt.Errorf("bad attachment %q, want containerID/ifName", a)
			}
			valid = append(valid, types.GCAttachment{ContainerID: id, IfName: ifName})
		}
		return cni.GCNetworkList(ctx, list, &libcni.GCArgs{ValidAttachments: valid})
	}
	return fmt.Errorf("unknown command %s", command)
}
