// Command gen writes the two files main.go embeds, as upstream's generate.go does: the provider module's committed
// schema.json with its version set, and terraform-mapping.json compacted.
//
// Usage (from tools/kubernetes): go run ./gen VERSION
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)

const providerModule = "github.com/pulumi/pulumi-kubernetes/provider/v4"

func main() {
	if len(os.Args) != 2 {
		fail(fmt.Errorf("usage: go run ./gen VERSION"))
	}
	// go mod download, not go list -m: on a fresh module cache only download fetches (and checks against go.sum) a
	// module none of gen's own imports needs.
	out, err := exec.Command("go", "mod", "download", "-json", providerModule).Output()
	if err != nil {
		fail(fmt.Errorf("go mod download %s: %w", providerModule, err))
	}
	var module struct{ Dir, Error string }
	if err := json.Unmarshal(out, &module); err != nil || module.Dir == "" {
		fail(fmt.Errorf("go mod download %s: no module folder (%s)", providerModule, module.Error))
	}
	src := filepath.Join(module.Dir, "cmd", "pulumi-resource-kubernetes")

	var spec schema.PackageSpec
	read(filepath.Join(src, "schema.json"), &spec)
	spec.Version = os.Args[1]
	write("schema-embed.json", spec)

	var mapping any
	read(filepath.Join(src, "terraform-mapping.json"), &mapping)
	write("terraform-mapping-embed.json", mapping)
}

func read(path string, into any) {
	data, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(data, into)
	}
	if err != nil {
		fail(fmt.Errorf("%s: %w", path, err))
	}
}

func write(path string, value any) {
	data, err := json.Marshal(value)
	if err == nil {
		err = os.WriteFile(path, data, 0o644)
	}
	if err != nil {
		fail(fmt.Errorf("%s: %w", path, err))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gen:", err)
	os.Exit(1)
}
