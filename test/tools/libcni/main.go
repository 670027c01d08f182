// libcni-driver runs one CNI operation on a conflist through a real libcni, as a container runtime does:
// libcni 1.1 (containerd 1.6/1.7) or, built with -tags libcni12, libcni >= 1.2 (containerd 2, CRI-O), which
// also negotiates cniVersions and can call GC and STATUS. Test tool only.
//
// Usage: libcni-driver <conflist> <add|check|del|status|gc|version> [containerID netns ifName] [valid containerID/ifName ...]
// Env: CNI_PATH (plugin dirs, colon separated), CNI_CACHE_DIR, CNI_ARGS (K=V;... for ADD/CHECK/DEL).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("usage: libcni-driver <conflist> <command> ...")
	}
	list, err := libcni.ConfListFromFile(args[0])
	if err != nil {
		return err
	}
	cni := libcni.NewCNIConfigWithCacheDir(filepath.SplitList(os.Getenv("CNI_PATH")), os.Getenv("CNI_CACHE_DIR"), nil)
	ctx := context.Background()
	switch args[1] {
	case "version":
		// The version this libcni settled on for the list.
		return emit(map[string]string{"cniVersion": list.CNIVersion})
	case "add", "check", "del":
		if len(args) != 5 {
			return fmt.Errorf("%s needs containerID netns ifName", args[1])
		}
		rt := &libcni.RuntimeConf{ContainerID: args[2], NetNS: args[3], IfName: args[4], Args: cniArgs()}
		switch args[1] {
		case "add":
			result, err := cni.AddNetworkList(ctx, list, rt)
			if err != nil {
				return err
			}
			return emit(result)
		case "check":
			return cni.CheckNetworkList(ctx, list, rt)
		default:
			return cni.DelNetworkList(ctx, list, rt)
		}
	default:
		return extra(ctx, cni, list, args[1], args[2:])
	}
}

func cniArgs() [][2]string {
	var out [][2]string
	for _, pair := range strings.Split(os.Getenv("CNI_ARGS"), ";") {
		if k, v, ok := strings.Cut(pair, "="); ok {
			out = append(out, [2]string{k, v})
		}
	}
	return out
}

func emit(v any) error {
	return json.NewEncoder(os.Stdout).Encode(v)
}
