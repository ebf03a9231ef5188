// Command pulumi-resource-kubernetes is the Pulumi Kubernetes provider that `make tools` builds.
//
// Upstream's main (provider/v4/cmd/pulumi-resource-kubernetes) embeds schema-embed.json and
// terraform-mapping-embed.json, which `go generate` writes there and git ignores, so the module the proxy serves
// cannot build it. This main does what upstream's does with copies that gen/ writes beside it from the module's
// committed schema.json and terraform-mapping.json (both gitignored here too).
package main

import (
	_ "embed"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema-embed.json
var pulumiSchema []byte

//go:embed terraform-mapping-embed.json
var terraformMapping []byte

func main() {
	provider.Serve("kubernetes", version.Version, pulumiSchema, terraformMapping)
}
